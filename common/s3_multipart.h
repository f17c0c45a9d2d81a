// Multipart uploads with several parts in flight: how the s3:// store's
// writer (common/s3_store.h) puts a big object. Memory is bounded by
// parts_in_flight x part_size (8 x 8 MiB = 64 MiB by default, plus one part
// being filled by the caller).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/bounded_executor.h"
#include "common/s3_client.h"

namespace sg {

struct TransferOptions {
  int parts_in_flight = 8;
  uint64_t min_part_size = 8ull << 20;  // parts are at least this big (S3's minimum: 5 MiB)
  BodyCheck part_check;                 // how the server checks each part
};

inline constexpr uint64_t kMaxParts = 10'000;
inline constexpr uint64_t kMaxPartSize = 5ull << 30;

// The part size for an object of `size` bytes: at least `min_part_size`,
// large enough for at most 10,000 parts, a whole number of MiB.
uint64_t ChoosePartSize(uint64_t size, uint64_t min_part_size);
// The part size of a store writer (S3Store::NewWriter) for an object of
// about `size_hint` bytes, 0 when not known: `min_part_size`, or larger for
// an object that would not fit in 10,000 parts of it. Every part but the
// last holds at least this many bytes. The hint is the raw size, which the
// stored bytes can overrun a little (frames that do not compress), so the
// size is chosen for a hint 1/32 larger.
uint64_t WriterPartSize(uint64_t min_part_size, uint64_t size_hint);

// One multipart upload, as a state machine:
//   kIdle --Start--> kUploading --AddPart*--> --Complete--> kCompleted
//                         \--(a part fails, Abort, or destruction)--> kAborted
// Parts are numbered 1, 2, ... in the order they are added and uploaded in
// parallel, each checked as `part_check` says and retried on its own.
class MultipartUpload {
 public:
  enum class State { kIdle, kUploading, kCompleted, kAborted };

  MultipartUpload(S3Client& client, std::string bucket, std::string key,
                  const TransferOptions& options);
  ~MultipartUpload();  // aborts an upload that was started but not completed

  Status Start();
  // REQUIRES: state() == kUploading. Blocks while parts_in_flight parts are
  // uploading. Returns the first error of an earlier part.
  Status AddPart(std::string data);
  // Waits for every part, then commits the object. On any failure the upload
  // is aborted so no parts are left behind. Returns the object's etag.
  StatusOr<std::string> Complete(const PutCondition& condition = {});
  Status Abort();

  State state() const { return state_; }
  const std::string& upload_id() const { return upload_id_; }
  int parts_added() const { return next_part_ - 1; }

 private:
  S3Client& client_;
  const std::string bucket_, key_;
  const TransferOptions options_;
  State state_ = State::kIdle;
  std::string upload_id_;
  int next_part_ = 1;
  std::mutex mu_;
  std::vector<PartInfo> done_;
  std::unique_ptr<BoundedExecutor> executor_;
};

}  // namespace sg
