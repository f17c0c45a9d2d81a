// An ObjectStore held in memory, with S3's contracts (the conformance suite
// runs against it, tests/unit/memory_store_test.cc): atomic puts with
// create-only and if-match conditions, ranged gets, byte-ordered paged
// listings, writers visible only at commit. For the fake multi-node world
// (tests/support/fake_group_world.h), where N agents share one store in one
// process. Thread-safe.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/object_store.h"

namespace sg::testing {

class MemoryStore final : public ObjectStore {
 public:
  // `clock` (may be null: the system clock) stamps each object's modified time.
  explicit MemoryStore(Clock* clock = nullptr) : clock_(clock) {}

  StatusOr<std::string> Put(const std::string& key, std::string_view data,
                            const PutCondition& condition) override {
    std::lock_guard<std::mutex> lock(mu_);
    return PutLocked(key, std::string(data), condition);
  }
  // The defaults as ObjectStore's, for tests that read through a MemoryStore&.
  StatusOr<std::string> Get(const std::string& key, std::optional<ByteRange> range = {},
                            ObjectInfo* info = nullptr) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return Status::NotFound("no object " + key);
    const std::string& body = it->second.body;
    if (info) *info = InfoOf(key, it->second);
    if (!range) return body;
    if (!body.empty() && range->offset >= body.size()) {
      return Status::OutOfRange("range starts past the end of " + key);
    }
    const uint64_t from = std::min<uint64_t>(range->offset, body.size());
    const uint64_t n = std::min<uint64_t>(range->length.value_or(body.size()), body.size() - from);
    return body.substr(from, n);
  }
  StatusOr<ObjectInfo> Head(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return Status::NotFound("no object " + key);
    return InfoOf(key, it->second);
  }
  StatusOr<ListPage> List(const std::string& prefix, const std::string& token,
                          int max_keys) override {
    std::lock_guard<std::mutex> lock(mu_);
    ListPage page;
    auto it = token.empty() ? objects_.lower_bound(prefix) : objects_.upper_bound(token);
    for (; it != objects_.end() && it->first.starts_with(prefix); ++it) {
      if (static_cast<int>(page.objects.size()) == max_keys) {
        page.next_token = page.objects.back().key;
        break;
      }
      page.objects.push_back(InfoOf(it->first, it->second));
    }
    return page;
  }
  Status Delete(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    objects_.erase(key);
    return Status::Ok();
  }
  StatusOr<std::unique_ptr<ObjectWriter>> NewWriter(const std::string& key,
                                                    uint64_t /*size_hint*/ = 0) override {
    return std::unique_ptr<ObjectWriter>(new Writer(*this, key));
  }
  StatusOr<int> CleanStaleWrites(const std::string&, std::chrono::seconds,
                                 const KeyFilter&) override {
    return 0;  // an unfinished writer holds its bytes itself: nothing is left
  }
  std::string Describe() const override { return "memory://"; }

 private:
  struct Object {
    std::string body;
    std::string etag;
    std::chrono::system_clock::time_point modified;
  };
  class Writer final : public ObjectWriter {
   public:
    Writer(MemoryStore& store, std::string key) : store_(store), key_(std::move(key)) {}
    Status Append(std::string data) override {
      body_ += data;
      return Status::Ok();
    }
    StatusOr<std::string> Commit() override {
      std::lock_guard<std::mutex> lock(store_.mu_);
      return store_.PutLocked(key_, std::move(body_), PutCondition::None());
    }
    void Abort() override { body_.clear(); }

   private:
    MemoryStore& store_;
    const std::string key_;
    std::string body_;
  };

  StatusOr<std::string> PutLocked(const std::string& key, std::string body,
                                  const PutCondition& condition) {
    auto it = objects_.find(key);
    using Kind = PutCondition::Kind;
    if (condition.kind == Kind::kCreateOnly && it != objects_.end()) {
      return Status::PreconditionFailed(key + " exists");
    }
    if (condition.kind == Kind::kIfMatch &&
        (it == objects_.end() || it->second.etag != condition.etag)) {
      return Status::PreconditionFailed(key + " does not match " + condition.etag);
    }
    Object& o = objects_[key];
    o.body = std::move(body);
    o.etag = "\"m" + std::to_string(++writes_) + "\"";
    o.modified = clock_ ? clock_->Now() : std::chrono::system_clock::now();
    return o.etag;
  }
  static ObjectInfo InfoOf(const std::string& key, const Object& o) {
    return ObjectInfo{key, o.body.size(), o.etag, o.modified};
  }

  Clock* const clock_;
  std::mutex mu_;
  std::map<std::string, Object> objects_;  // byte order of key, as S3 lists
  uint64_t writes_ = 0;
};

}  // namespace sg::testing
