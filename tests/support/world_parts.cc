// The fake multi-node world's baton, its trainers' expected totals and each
// node's view of the store (tests/support/fake_group_world.h).
#include <thread>

#include "tests/support/fake_group_world.h"

namespace sg::testing {

// Each thread waits on a semaphore of its own: a hand-over wakes only the
// thread whose turn it is.
std::binary_semaphore& Baton::Gate(int who) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& gate = gates_[who];
  if (!gate) gate = std::make_unique<std::binary_semaphore>(0);
  return *gate;
}

void Baton::Pass(int who) {
  Gate(who).release();
  world_.acquire();
}

void Baton::Yield(int me) {
  world_.release();
  Gate(me).acquire();
}

void Baton::Await(int me) { Gate(me).acquire(); }

void Baton::Done() { world_.release(); }

int64_t ExpectedTotal(int rank, int steps) {
  int64_t total = 0;
  for (int step = 1; step <= steps; ++step) total = (total * 31 + step * (rank + 1)) % 1000000007;
  return total;
}

Status NodeStore::Gate(const std::string& key) {
  if (std::this_thread::get_id() == loop_) {
    while (frozen_ && !dead_) yield_();
    if (delay_.count() > 0) {
      const auto until = clock_.Monotonic() + delay_;
      while (clock_.Monotonic() < until && !dead_) yield_();
    }
  } else if (frozen_) {
    return Status::Unavailable("injected: a call on " + key + " timed out");
  }
  if (dead_) return Status::Unavailable("injected: the instance is gone");
  if (!fail_fragment_.empty() && key.find(fail_fragment_) != std::string::npos) {
    return Status::Unavailable("injected: a call on " + key + " failed");
  }
  return Status::Ok();
}

StatusOr<std::string> NodeStore::Put(const std::string& key, std::string_view data,
                                     const PutCondition& condition) {
  if (!die_fragment_.empty() && !dead_ && key.find(die_fragment_) != std::string::npos) {
    dead_ = true;
    if (on_die_) on_die_();
  }
  SG_RETURN_IF_ERROR(Gate(key));
  return base_.Put(key, data, condition);
}
StatusOr<std::string> NodeStore::Get(const std::string& key, std::optional<ByteRange> range,
                                     ObjectInfo* info) {
  SG_RETURN_IF_ERROR(Gate(key));
  return base_.Get(key, range, info);
}
StatusOr<ObjectInfo> NodeStore::Head(const std::string& key) {
  SG_RETURN_IF_ERROR(Gate(key));
  return base_.Head(key);
}
StatusOr<ListPage> NodeStore::List(const std::string& prefix, const std::string& token,
                                   int max_keys) {
  SG_RETURN_IF_ERROR(Gate(prefix));
  return base_.List(prefix, token, max_keys);
}
Status NodeStore::Delete(const std::string& key) {
  SG_RETURN_IF_ERROR(Gate(key));
  return base_.Delete(key);
}
StatusOr<std::unique_ptr<ObjectWriter>> NodeStore::NewWriter(const std::string& key,
                                                              uint64_t size_hint) {
  SG_RETURN_IF_ERROR(Gate(key));
  return base_.NewWriter(key, size_hint);
}
StatusOr<int> NodeStore::CleanStaleWrites(const std::string& prefix, std::chrono::seconds age,
                                          const KeyFilter& spare) {
  SG_RETURN_IF_ERROR(Gate(prefix));
  return base_.CleanStaleWrites(prefix, age, spare);
}

}  // namespace sg::testing
