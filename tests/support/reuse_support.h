// For tests of frame reuse and retention: a store that numbers its
// operations (to run a hook before, or "die" at, any one of them), and the
// count that the crash trials report, of references that kept snapshots
// make to objects that are missing or too short.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "agent/repo/manifest.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/store_layout.h"
#include "common/object_store.h"

namespace sg::testing {

class StepStore final : public ObjectStore {
 public:
  enum class Kind { kPut, kGet, kHead, kList, kDelete, kNewWriter, kAppend, kCommit, kClean };
  struct Op {
    Kind kind;
    std::string key;
  };
  explicit StepStore(ObjectStore& base) : base_(base) {}

  // Runs before every operation (not under a lock; it may use the store).
  void BeforeStep(std::function<void(const Op&)> hook) { hook_ = std::move(hook); }
  // Runs after every Get has returned, with the key it read.
  void AfterGet(std::function<void(const std::string&)> hook) { after_get_ = std::move(hook); }
  // Operation `n` (1-based, counting writes only: Put, Delete, NewWriter,
  // Append, Commit) and everything after it fail, as if the process died
  // just before it.
  void DieAtWrite(int n) { die_at_ = n; }
  bool dead() const { return dead_; }
  int writes() const { return writes_; }
  int deletes() const { return deletes_; }
  bool hooked() const { return hooked_; }
  void set_hooked() { hooked_ = true; }

  StatusOr<std::string> Put(const std::string& key, std::string_view data,
                            const PutCondition& condition) override {
    SG_RETURN_IF_ERROR(Step({Kind::kPut, key}));
    return base_.Put(key, data, condition);
  }
  StatusOr<std::string> Get(const std::string& key, std::optional<ByteRange> range,
                            ObjectInfo* info) override {
    SG_RETURN_IF_ERROR(Step({Kind::kGet, key}));
    auto got = base_.Get(key, range, info);
    if (after_get_) after_get_(key);
    return got;
  }
  StatusOr<ObjectInfo> Head(const std::string& key) override {
    SG_RETURN_IF_ERROR(Step({Kind::kHead, key}));
    return base_.Head(key);
  }
  StatusOr<ListPage> List(const std::string& prefix, const std::string& token,
                          int max_keys) override {
    SG_RETURN_IF_ERROR(Step({Kind::kList, prefix}));
    return base_.List(prefix, token, max_keys);
  }
  Status Delete(const std::string& key) override {
    SG_RETURN_IF_ERROR(Step({Kind::kDelete, key}));
    ++deletes_;
    return base_.Delete(key);
  }
  StatusOr<std::unique_ptr<ObjectWriter>> NewWriter(const std::string& key,
                                                    uint64_t size_hint = 0) override {
    SG_RETURN_IF_ERROR(Step({Kind::kNewWriter, key}));
    SG_ASSIGN_OR_RETURN(std::unique_ptr<ObjectWriter> w, base_.NewWriter(key, size_hint));
    return std::unique_ptr<ObjectWriter>(new Writer(*this, std::move(w), key));
  }
  StatusOr<int> CleanStaleWrites(const std::string& prefix, std::chrono::seconds age,
                                 const KeyFilter& spare) override {
    SG_RETURN_IF_ERROR(Step({Kind::kClean, prefix}));
    return base_.CleanStaleWrites(prefix, age, spare);
  }
  std::string Describe() const override { return "steps(" + base_.Describe() + ")"; }

 private:
  class Writer final : public ObjectWriter {
   public:
    Writer(StepStore& owner, std::unique_ptr<ObjectWriter> base, std::string key)
        : owner_(owner), base_(std::move(base)), key_(std::move(key)) {}
    Status Append(std::string data) override {
      SG_RETURN_IF_ERROR(owner_.Step({Kind::kAppend, key_}));
      return base_->Append(std::move(data));
    }
    StatusOr<std::string> Commit() override {
      SG_RETURN_IF_ERROR(owner_.Step({Kind::kCommit, key_}));
      return base_->Commit();
    }
    void Abort() override { base_->Abort(); }

   private:
    StepStore& owner_;
    std::unique_ptr<ObjectWriter> base_;
    std::string key_;
  };

  Status Step(const Op& op) {
    if (hook_) hook_(op);
    const bool write = op.kind == Kind::kPut || op.kind == Kind::kDelete ||
                       op.kind == Kind::kNewWriter || op.kind == Kind::kAppend ||
                       op.kind == Kind::kCommit;
    std::lock_guard<std::mutex> lock(mu_);
    if (write && ++writes_ == die_at_) dead_ = true;
    if (dead_) return Status::Unavailable("the process is dead (injected)");
    return Status::Ok();
  }

  ObjectStore& base_;
  std::function<void(const Op&)> hook_;
  std::function<void(const std::string&)> after_get_;
  std::mutex mu_;
  int die_at_ = 0;
  int writes_ = 0;
  std::atomic<int> deletes_{0};
  std::atomic<bool> dead_{false};
  bool hooked_ = false;
};

// The job's kept snapshots (those a restore would consider, with a readable
// manifest) and their references to an object that is missing or shorter
// than the frame's end. `kept` is -1 when the store cannot be read.
struct ReferenceAudit {
  int kept = 0;
  int broken = 0;   // kept snapshots with at least one missing reference
  int missing = 0;  // missing references, over all kept snapshots
};

inline ReferenceAudit AuditReferences(ObjectStore& store, const std::string& job) {
  ReferenceAudit audit;
  SnapshotCatalog catalog(store, job);
  auto history = catalog.History();
  if (!history.ok()) return {-1, 0, 0};
  std::map<std::string, uint64_t> sizes;  // objects seen, by key
  for (const SnapshotHistory::Entry& e : history->entries) {
    if (!e.manifest.ok()) continue;
    ++audit.kept;
    int missing = 0;
    for (const ManifestFile& f : e.manifest->files) {
      for (const FrameRef& r : f.frames) {
        const std::string key = JobPrefix(job) + r.key;
        auto it = sizes.find(key);
        if (it == sizes.end()) {
          auto info = store.Head(key);
          it = sizes.emplace(key, info.ok() ? info->size : 0).first;
        }
        if (it->second < r.offset + r.stored) ++missing;
      }
    }
    audit.missing += missing;
    if (missing > 0) ++audit.broken;
  }
  return audit;
}

// Missing references of the job's kept snapshots; -1 when the store cannot
// be read.
inline int CountMissingReferences(ObjectStore& store, const std::string& job) {
  const ReferenceAudit audit = AuditReferences(store, job);
  return audit.kept < 0 ? -1 : audit.missing;
}

}  // namespace sg::testing
