// Moving big objects through S3 quickly: multipart uploads with several parts
// in flight and parallel ranged downloads. Memory is bounded by
// parts_in_flight x part_size (8 x 8 MiB = 64 MiB by default, plus one part
// being filled by the caller).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/bounded_executor.h"
#include "common/s3_client.h"

namespace sg {

struct TransferOptions {
  int parts_in_flight = 8;
  uint64_t min_part_size = 8ull << 20;  // parts are at least this big (S3's minimum: 5 MiB)
};

inline constexpr uint64_t kMaxParts = 10'000;
inline constexpr uint64_t kMaxPartSize = 5ull << 30;

// The part size for an object of `size` bytes: at least `min_part_size`,
// large enough for at most 10,000 parts, a whole number of MiB.
uint64_t ChoosePartSize(uint64_t size, uint64_t min_part_size);

// One multipart upload, as a state machine:
//   kIdle --Start--> kUploading --AddPart*--> --Complete--> kCompleted
//                         \--(a part fails, Abort, or destruction)--> kAborted
// Parts are numbered 1, 2, ... in the order they are added and uploaded in
// parallel, each with a Content-MD5 the server checks and retried on its own.
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

// Uploads a local file: one PUT when it fits in a part, else multipart.
// Returns the etag.
StatusOr<std::string> UploadFile(S3Client& client, const std::string& bucket,
                                 const std::string& key, const std::string& path,
                                 const TransferOptions& options,
                                 const PutCondition& condition = {});

// Fetches the object in ranges with up to parts_in_flight requests at once and
// hands each piece to `sink` (called from several threads, in any order).
Status ParallelGet(S3Client& client, const std::string& bucket, const std::string& key,
                   uint64_t size, const TransferOptions& options,
                   const std::function<Status(uint64_t offset, std::string data)>& sink);

// Downloads the object into `path` (created or truncated), writing each range
// in place with pwrite, then fsyncs. Returns the number of bytes.
StatusOr<uint64_t> DownloadFile(S3Client& client, const std::string& bucket, const std::string& key,
                                const std::string& path, const TransferOptions& options);

}  // namespace sg

namespace sg {

// Downloads the object in parallel ranges but hands the bytes to `consumer`
// strictly in order (e.g. a decompressor). At most parts_in_flight ranges are
// fetched ahead of the consumer.
Status DownloadInOrder(S3Client& client, const std::string& bucket, const std::string& key,
                       const TransferOptions& options,
                       const std::function<Status(std::string_view)>& consumer);

}  // namespace sg
