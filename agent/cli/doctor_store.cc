// `doctor`'s store checks (agent/cli/doctor_command.h, CheckStore): probe objects
// under a prefix of their own show whether the store answers, takes writes
// and deletes, honours create-only and If-Match writes, and keeps time.
#include <string>
#include <vector>

#include "agent/cli/doctor_checks.h"
#include "agent/cli/doctor_command.h"
#include "agent/repo/repository.h"
#include "common/files.h"

namespace sg {
namespace {

using doctor_detail::Fail;
using doctor_detail::Ok;
using doctor_detail::Warn;

// Probe objects of one doctor run, under a prefix no one else writes.
class StoreProbe {
 public:
  StoreProbe(ObjectStore& store, const std::string& job, Clock& clock)
      : store_(store),
        clock_(clock),
        job_prefix_(Repository::Open(store, job).Prefix()),
        prefix_(Repository::Open(store, job).ProbePrefix(RandomHex(6))) {}

  DoctorCheck Reachable() {
    auto page = store_.List(job_prefix_, "", 1);
    if (!page.ok()) {
      silent_ = page.status().reason() == kNoAnswerReason;
      return Fail("store", "cannot list " + Where() + ": " + page.status().message());
    }
    return Ok("store",
              "listed " + Where() +
                  (page->objects.empty() ? " (nothing there yet)" : " (the job has objects)"));
  }

  DoctorCheck WriteAndDelete() {
    const std::string key = prefix_ + "write";
    const std::string data = "spotguard doctor write probe " + RandomHex(4);
    auto put = store_.Put(key, data, PutCondition::None());
    if (!put.ok()) return Fail("write", "cannot write " + key + ": " + put.status().message());
    auto back = store_.Get(key);
    if (!back.ok()) {
      Forget(key);
      return Fail("write", "wrote " + key + " but cannot read it back: " + back.status().message());
    }
    if (*back != data) {
      Forget(key);
      return Fail("write", "read back different bytes from " + key);
    }
    if (Status st = store_.Delete(key); !st.ok()) {
      return Fail("write", "wrote " + key + " but cannot delete it: " + st.message());
    }
    auto head = store_.Head(key);
    if (head.ok()) return Fail("write", "deleted " + key + " but it is still there");
    if (!head.status().Is(StatusCode::kNotFound)) {
      return Fail("write", "after deleting " + key + ": " + head.status().message());
    }
    return Ok("write", "put, read back and deleted a probe object under " + prefix_);
  }

  DoctorCheck CreateOnly() {
    const std::string key = prefix_ + "create-only";
    auto first = store_.Put(key, "first", PutCondition::CreateOnly());
    if (!first.ok()) {
      return Fail("create-only",
                  "a create-only write of a new key failed: " + first.status().message());
    }
    auto second = store_.Put(key, "second", PutCondition::CreateOnly());
    DoctorCheck result;
    if (second.ok()) {
      result = Fail("create-only",
                    "a second create-only write of the same key SUCCEEDED: the store ignores "
                    "If-None-Match: *, so two instances could both take the lease or commit the "
                    "same snapshot; use a store that honours conditional writes");
    } else if (!second.status().Is(StatusCode::kPreconditionFailed)) {
      result = Fail("create-only",
                    "the second create-only write failed, but not with "
                    "PreconditionFailed: " +
                        second.status().message());
    } else if (auto now = store_.Get(key); !now.ok() || *now != "first") {
      result = Fail("create-only", "the refused create-only write still changed the object");
    } else {
      result = Ok("create-only",
                  "a second create-only write of one key was refused "
                  "(PreconditionFailed)");
    }
    Forget(key);
    return result;
  }

  DoctorCheck IfMatch() {
    const std::string key = prefix_ + "if-match";
    auto v1 = store_.Put(key, "v1", PutCondition::None());
    if (!v1.ok()) return Fail("if-match", "cannot write " + key + ": " + v1.status().message());
    DoctorCheck result;
    auto v2 = store_.Put(key, "v2", PutCondition::IfMatch(*v1));
    if (!v2.ok()) {
      result = Fail("if-match",
                    "a write with the object's current etag was refused: " + v2.status().message());
    } else if (auto stale = store_.Put(key, "v3", PutCondition::IfMatch(*v1)); stale.ok()) {
      result = Fail("if-match",
                    "a write with a STALE etag succeeded: the store ignores If-Match, so a "
                    "fenced instance could overwrite the lease of the one that took over");
    } else if (!stale.status().Is(StatusCode::kPreconditionFailed)) {
      result = Fail("if-match",
                    "a write with a stale etag failed, but not with "
                    "PreconditionFailed: " +
                        stale.status().message());
    } else if (auto now = store_.Get(key); !now.ok() || *now != "v2") {
      result = Fail("if-match", "the refused If-Match write still changed the object");
    } else {
      result = Ok("if-match", "the current etag is accepted and a stale one refused");
    }
    Forget(key);
    return result;
  }

  DoctorCheck ClockSkew() {
    const std::string key = prefix_ + "clock";
    const auto before = clock_.Now();
    auto put = store_.Put(key, "clock", PutCondition::None());
    const auto after = clock_.Now();
    if (!put.ok()) {
      return Fail("clock",
                  "cannot write a probe object to compare clocks: " + put.status().message());
    }
    auto head = store_.Head(key);
    Forget(key);
    if (!head.ok()) {
      return Fail("clock", "cannot read the probe object's time: " + head.status().message());
    }
    if (head->modified == Clock::WallTime{}) {
      return Warn("clock", "the store gave no modification time; skew not measured");
    }
    // S3 keeps whole seconds; anything within the request's own window is no skew.
    const auto tolerance = std::chrono::seconds(1);
    std::chrono::seconds skew{0};
    if (head->modified < before - tolerance) {
      skew = std::chrono::duration_cast<std::chrono::seconds>(head->modified - before);
    } else if (head->modified > after + tolerance) {
      skew = std::chrono::duration_cast<std::chrono::seconds>(head->modified - after);
    }
    return JudgeClockSkew(skew);
  }

  // The listing got no answer at all (docs/design.md §12): the other
  // probes would only wait as long again each.
  bool silent() const { return silent_; }

  // Deletes the probe objects; returns those that are left.
  std::vector<std::string> CleanUp() {
    std::vector<std::string> left;
    for (const std::string& key : written_) {
      if (!store_.Delete(key).ok()) left.push_back(key);
    }
    auto rest = ListAll(store_, prefix_);
    if (rest.ok()) {
      for (const ObjectInfo& o : *rest) {
        if (!store_.Delete(o.key).ok()) left.push_back(o.key);
      }
    }
    return left;
  }

 private:
  std::string Where() const {
    return store_.Describe() + "/" + (job_prefix_.empty() ? "" : job_prefix_);
  }
  // Deletes now, and again at CleanUp if that fails.
  void Forget(const std::string& key) {
    if (!store_.Delete(key).ok()) written_.push_back(key);
  }

  ObjectStore& store_;
  Clock& clock_;
  const std::string job_prefix_;
  const std::string prefix_;
  std::vector<std::string> written_;
  bool silent_ = false;
};

}  // namespace

std::vector<DoctorCheck> CheckStore(ObjectStore& store, const std::string& job, Clock& clock) {
  StoreProbe probe(store, job, clock);
  std::vector<DoctorCheck> checks;
  checks.push_back(probe.Reachable());
  if (probe.silent()) {
    for (const char* name : {"write", "create-only", "if-match", "clock"}) {
      checks.push_back(Fail(name, "not run: the store does not answer"));
    }
    return checks;
  }
  checks.push_back(probe.WriteAndDelete());
  checks.push_back(probe.CreateOnly());
  checks.push_back(probe.IfMatch());
  checks.push_back(probe.ClockSkew());
  if (auto left = probe.CleanUp(); !left.empty()) {
    checks.push_back(Warn("cleanup", "could not delete " + std::to_string(left.size()) +
                                         " probe object(s), e.g. " + left.front() +
                                         "; delete them by hand"));
  }
  return checks;
}

}  // namespace sg
