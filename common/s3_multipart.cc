#include "common/s3_multipart.h"

#include <algorithm>

#include "common/log.h"

namespace sg {

uint64_t ChoosePartSize(uint64_t size, uint64_t min_part_size) {
  constexpr uint64_t kMiB = 1ull << 20;
  uint64_t part = std::max<uint64_t>(min_part_size, 5 * kMiB);
  const uint64_t needed = (size + kMaxParts - 1) / kMaxParts;
  part = std::max(part, needed);
  part = (part + kMiB - 1) / kMiB * kMiB;
  return std::min(part, kMaxPartSize);
}

uint64_t WriterPartSize(uint64_t min_part_size, uint64_t size_hint) {
  if (size_hint == 0) return min_part_size;
  return ChoosePartSize(size_hint + size_hint / 32, min_part_size);
}

MultipartUpload::MultipartUpload(S3Client& client, std::string bucket, std::string key,
                                 const TransferOptions& options)
    : client_(client), bucket_(std::move(bucket)), key_(std::move(key)), options_(options) {}

MultipartUpload::~MultipartUpload() {
  if (state_ == State::kUploading) (void)Abort();
}

Status MultipartUpload::Start() {
  if (state_ != State::kIdle) return Status::InvalidArgument("multipart upload already started");
  SG_ASSIGN_OR_RETURN(upload_id_, client_.CreateMultipartUpload(bucket_, key_));
  executor_ = std::make_unique<BoundedExecutor>(options_.parts_in_flight, options_.parts_in_flight);
  state_ = State::kUploading;
  return Status::Ok();
}

Status MultipartUpload::AddPart(std::string data) {
  if (state_ != State::kUploading) return Status::InvalidArgument("multipart upload not open");
  if (next_part_ > static_cast<int>(kMaxParts)) {
    return Status::InvalidArgument("more than 10,000 parts for " + key_);
  }
  const int number = next_part_++;
  auto shared = std::make_shared<std::string>(std::move(data));
  Status st = executor_->Submit([this, number, shared]() -> Status {
    const uint64_t size = shared->size();
    SG_ASSIGN_OR_RETURN(std::string etag,
                        client_.UploadPart(bucket_, key_, upload_id_, number, std::move(*shared),
                                           options_.part_check));
    std::lock_guard<std::mutex> lock(mu_);
    done_.push_back({number, std::move(etag), size});
    return Status::Ok();
  });
  if (!st.ok()) (void)Abort();
  return st;
}

StatusOr<std::string> MultipartUpload::Complete(const PutCondition& condition) {
  if (state_ != State::kUploading) return Status::InvalidArgument("multipart upload not open");
  Status st = executor_->Wait();
  if (st.ok() && done_.empty()) st = Status::InvalidArgument("multipart upload without parts");
  if (!st.ok()) {
    (void)Abort();
    return st;
  }
  std::sort(done_.begin(), done_.end(),
            [](const PartInfo& a, const PartInfo& b) { return a.number < b.number; });
  auto result = client_.CompleteMultipartUpload(bucket_, key_, upload_id_, done_, condition);
  if (!result.ok()) {
    (void)Abort();
    return result.status();
  }
  state_ = State::kCompleted;
  return result->etag;
}

Status MultipartUpload::Abort() {
  if (state_ != State::kUploading) return Status::Ok();
  state_ = State::kAborted;
  if (executor_) (void)executor_->Wait();  // no part may land after the abort
  Status st = client_.AbortMultipartUpload(bucket_, key_, upload_id_);
  if (!st.ok()) LogWarn("aborting multipart upload of {} failed: {}", key_, st.message());
  return st;
}

}  // namespace sg
