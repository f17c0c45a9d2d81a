// An ObjectStore wrapper with faults as switches, after leveldb's
// fault-injection Env: fail (or "die" at) the first write whose key matches,
// or run a hook on the first append of a matching writer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "common/object_store.h"

namespace sg::testing {

class FaultyStore final : public ObjectStore {
 public:
  explicit FaultyStore(ObjectStore& base) : base_(base) {}

  // The first Put of a key containing `fragment` fails; with `die`, it and
  // every later operation fail, as if the process had been killed there.
  void FailPutOf(std::string fragment, bool die) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_fragment_ = std::move(fragment);
    die_ = die;
  }
  // Runs `hook` once, on the first Append to a writer whose key contains `fragment`.
  void OnFirstAppend(std::string fragment, std::function<void()> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    append_fragment_ = std::move(fragment);
    append_hook_ = std::move(hook);
  }
  // The first Put of a key containing `fragment` is carried out, but its
  // answer is lost: the caller gets an error (a timeout after the server
  // applied the write).
  void LoseAnswerOfPutOf(std::string fragment) {
    std::lock_guard<std::mutex> lock(mu_);
    lose_fragment_ = std::move(fragment);
  }
  // Every Get and Put of a key containing `fragment` waits until
  // ReleaseCalls(); held() is how many wait now.
  void HoldCallsOf(std::string fragment) {
    std::lock_guard<std::mutex> lock(mu_);
    hold_fragment_ = std::move(fragment);
  }
  void ReleaseCalls() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_fragment_.clear();
    released_.notify_all();
  }
  int held() const { return held_; }
  bool dead() const { return dead_; }
  int puts() const { return puts_; }
  // The size hint each writer was opened with, by key.
  std::map<std::string, uint64_t> writer_size_hints() {
    std::lock_guard<std::mutex> lock(mu_);
    return size_hints_;
  }
  // The LIST requests' first pages under `prefix` so far: how often a
  // listing of it was begun.
  int listings_of(const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = listings_.find(prefix);
    return it == listings_.end() ? 0 : it->second;
  }

  StatusOr<std::string> Put(const std::string& key, std::string_view data,
                            const PutCondition& condition) override {
    SG_RETURN_IF_ERROR(Check(key));
    Hold(key);
    ++puts_;
    auto put = base_.Put(key, data, condition);
    std::lock_guard<std::mutex> lock(mu_);
    if (put.ok() && !lose_fragment_.empty() && key.find(lose_fragment_) != std::string::npos) {
      lose_fragment_.clear();
      return Status::Unavailable("injected: the answer to the PUT of " + key + " was lost");
    }
    return put;
  }
  StatusOr<std::string> Get(const std::string& key, std::optional<ByteRange> range,
                            ObjectInfo* info) override {
    if (dead_) return Dead();
    Hold(key);
    return base_.Get(key, range, info);
  }
  StatusOr<ObjectInfo> Head(const std::string& key) override {
    if (dead_) return Dead();
    return base_.Head(key);
  }
  StatusOr<ListPage> List(const std::string& prefix, const std::string& token,
                          int max_keys) override {
    if (dead_) return Dead();
    if (token.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++listings_[prefix];
    }
    return base_.List(prefix, token, max_keys);
  }
  Status Delete(const std::string& key) override {
    if (dead_) return Dead();
    return base_.Delete(key);
  }
  StatusOr<std::unique_ptr<ObjectWriter>> NewWriter(const std::string& key,
                                                    uint64_t size_hint = 0) override;
  StatusOr<int> CleanStaleWrites(const std::string& prefix, std::chrono::seconds age,
                                 const KeyFilter& spare) override {
    if (dead_) return Dead();
    return base_.CleanStaleWrites(prefix, age, spare);
  }
  std::string Describe() const override { return "faulty(" + base_.Describe() + ")"; }

 private:
  class Writer;
  static Status Dead() { return Status::Unavailable("the process is dead (injected)"); }
  void Hold(const std::string& key) {
    std::unique_lock<std::mutex> lock(mu_);
    if (hold_fragment_.empty() || key.find(hold_fragment_) == std::string::npos) return;
    ++held_;
    released_.wait(lock, [&] { return hold_fragment_.empty(); });
    --held_;
  }
  Status Check(const std::string& key) {
    if (dead_) return Dead();
    std::lock_guard<std::mutex> lock(mu_);
    if (!fail_fragment_.empty() && key.find(fail_fragment_) != std::string::npos) {
      fail_fragment_.clear();
      if (die_) dead_ = true;
      return Status::Unavailable("injected failure writing " + key);
    }
    return Status::Ok();
  }

  ObjectStore& base_;
  std::mutex mu_;
  std::string fail_fragment_;
  std::string lose_fragment_;
  std::string hold_fragment_;
  std::condition_variable released_;
  std::atomic<int> held_{0};
  bool die_ = false;
  std::string append_fragment_;
  std::function<void()> append_hook_;
  std::atomic<bool> dead_{false};
  std::atomic<int> puts_{0};
  std::map<std::string, int> listings_;
  std::map<std::string, uint64_t> size_hints_;
};

class FaultyStore::Writer final : public ObjectWriter {
 public:
  Writer(FaultyStore& owner, std::unique_ptr<ObjectWriter> base, std::function<void()> hook)
      : owner_(owner), base_(std::move(base)), hook_(std::move(hook)) {}
  Status Append(std::string data) override {
    if (owner_.dead_) return Dead();
    if (hook_) std::exchange(hook_, nullptr)();
    return base_->Append(std::move(data));
  }
  StatusOr<std::string> Commit() override {
    if (owner_.dead_) return Dead();
    return base_->Commit();
  }
  void Abort() override { base_->Abort(); }

 private:
  FaultyStore& owner_;
  std::unique_ptr<ObjectWriter> base_;
  std::function<void()> hook_;
};

inline StatusOr<std::unique_ptr<ObjectWriter>> FaultyStore::NewWriter(const std::string& key,
                                                                     uint64_t size_hint) {
  SG_RETURN_IF_ERROR(Check(key));
  SG_ASSIGN_OR_RETURN(std::unique_ptr<ObjectWriter> base, base_.NewWriter(key, size_hint));
  std::function<void()> hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_hints_[key] = size_hint;
    if (append_hook_ && key.find(append_fragment_) != std::string::npos) {
      hook = std::exchange(append_hook_, nullptr);
    }
  }
  return std::unique_ptr<ObjectWriter>(new Writer(*this, std::move(base), std::move(hook)));
}

}  // namespace sg::testing
