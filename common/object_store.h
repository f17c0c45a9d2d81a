// The object store seam: the small set of operations that spotguard needs
// from S3, with the same meaning on every backend (s3:// and file://). The
// conformance suite in tests/conformance pins these contracts down.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/body_sink.h"
#include "common/status.h"

namespace sg {

struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
  std::string etag;  // opaque; changes whenever the object is replaced
  std::chrono::system_clock::time_point modified;
};

// A write precondition, as S3's If-None-Match / If-Match on PUT.
// Says yes to the keys a call must leave alone.
using KeyFilter = std::function<bool(const std::string& key)>;

struct PutCondition {
  enum class Kind { kNone, kCreateOnly, kIfMatch };
  Kind kind = Kind::kNone;
  std::string etag;  // for kIfMatch

  static PutCondition None() { return {}; }
  static PutCondition CreateOnly() { return {Kind::kCreateOnly, {}}; }
  static PutCondition IfMatch(std::string etag) { return {Kind::kIfMatch, std::move(etag)}; }
};

struct ByteRange {
  uint64_t offset = 0;
  std::optional<uint64_t> length;  // nullopt: to the end of the object
};

struct ListPage {
  std::vector<ObjectInfo> objects;  // ascending byte order of key
  std::string next_token;           // empty when this is the last page
};

// Writes one object in pieces, for objects too big to hold in memory. The
// object appears under its key only at Commit, atomically; a writer destroyed
// or aborted before that leaves nothing visible (S3: the multipart upload is
// aborted; file://: the temporary file is removed).
class ObjectWriter {
 public:
  virtual ~ObjectWriter() = default;
  // Appends bytes. May start sending them in the background; the first error
  // of such a transfer is returned by a later Append or by Commit.
  virtual Status Append(std::string data) = 0;
  // Makes the object visible (unconditionally) and returns its etag.
  virtual StatusOr<std::string> Commit() = 0;
  virtual void Abort() = 0;
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // Stores `data` under `key` atomically: a reader sees the previous object or
  // the new one, never a mix. Returns the new object's etag.
  // A precondition that does not hold (kCreateOnly on an existing key, kIfMatch
  // with another etag or on a missing key) fails with PreconditionFailed and
  // leaves the stored object untouched. Of several writers racing with the same
  // precondition, at most one succeeds.
  virtual StatusOr<std::string> Put(const std::string& key, std::string_view data,
                                    const PutCondition& condition) = 0;

  // The object's bytes, or the part `range` names. NotFound when the key does
  // not exist; OutOfRange when range->offset is at or past the end of a
  // non-empty object. A range running past the end is cut at the end.
  // When `info` is given it receives the object's size and etag.
  virtual StatusOr<std::string> Get(const std::string& key, std::optional<ByteRange> range = {},
                                    ObjectInfo* info = nullptr) = 0;

  // The bytes of `range`, as Get reads them, handed to `sink` as they arrive
  // (BodySink, common/body_sink.h): in order, each piece with its offset from the
  // range's start, offset 0 again when a retried read starts over. An error
  // the sink returns ends the read at once, without a retry, and is returned
  // with its code (its message may name the request). The default
  // reads with Get and hands the bytes over in one piece; the S3 store
  // streams them, so that a large range is never held whole.
  virtual Status GetTo(const std::string& key, ByteRange range, const BodySink& sink);

  // Size and etag without the bytes; NotFound when absent.
  virtual StatusOr<ObjectInfo> Head(const std::string& key) = 0;

  // Up to `max_keys` objects whose key starts with `prefix` (a plain string
  // prefix, not a directory) and sorts after the position that `token` marks;
  // pass the previous page's next_token to continue, "" to start.
  virtual StatusOr<ListPage> List(const std::string& prefix, const std::string& token,
                                  int max_keys = 1000) = 0;

  // Removes the object. Deleting a missing key succeeds, as on S3.
  virtual Status Delete(const std::string& key) = 0;

  // A writer for a large object under `key`, of about `size_hint` bytes
  // when the caller knows (0: unknown): an s3:// writer sizes its parts
  // from it, so that the object fits in S3's 10,000 parts. Its bytes are the caller's to
  // check end to end (snapshot frames carry their own digests): a store may
  // spare the server's check of them where nothing on the way can change
  // them (s3://: S3Store::Open).
  virtual StatusOr<std::unique_ptr<ObjectWriter>> NewWriter(const std::string& key,
                                                           uint64_t size_hint = 0) = 0;

  // Removes the leftovers of writers that died before committing and started
  // more than `age` ago: S3 multipart uploads under `prefix`, staged files of
  // the file store. A write whose key `spare` accepts stays, whatever its age
  // (a live writer's, docs/design.md §4); an empty `spare` spares none.
  // Returns how many were removed.
  virtual StatusOr<int> CleanStaleWrites(const std::string& prefix, std::chrono::seconds age,
                                         const KeyFilter& spare) = 0;

  // The store's URL for logs and messages (never holds a secret).
  virtual std::string Describe() const = 0;
};

// Lists every object under `prefix`, following pages.
StatusOr<std::vector<ObjectInfo>> ListAll(ObjectStore& store, const std::string& prefix);

}  // namespace sg
