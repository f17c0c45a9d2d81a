#include "common/s3_transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/crypto.h"
#include "common/files.h"
#include "common/log.h"
#include "common/ordered_pipeline.h"

namespace sg {

uint64_t ChoosePartSize(uint64_t size, uint64_t min_part_size) {
  constexpr uint64_t kMiB = 1ull << 20;
  uint64_t part = std::max<uint64_t>(min_part_size, 5 * kMiB);
  const uint64_t needed = (size + kMaxParts - 1) / kMaxParts;
  part = std::max(part, needed);
  part = (part + kMiB - 1) / kMiB * kMiB;
  return std::min(part, kMaxPartSize);
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
    const std::string md5 = Base64Encode(Md5(*shared));
    SG_ASSIGN_OR_RETURN(std::string etag, client_.UploadPart(bucket_, key_, upload_id_, number,
                                                             std::move(*shared), md5));
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

StatusOr<std::string> UploadFile(S3Client& client, const std::string& bucket,
                                 const std::string& key, const std::string& path,
                                 const TransferOptions& options, const PutCondition& condition) {
  SG_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path, O_RDONLY));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, "stat " + path);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint64_t part_size = ChoosePartSize(size, options.min_part_size);
  if (size <= part_size) {
    SG_ASSIGN_OR_RETURN(std::string body, PreadUpTo(fd.get(), 0, size, path));
    const std::string md5 = Base64Encode(Md5(body));
    SG_ASSIGN_OR_RETURN(S3PutResult r,
                        client.PutObject(bucket, key, std::move(body), condition, md5));
    return r.etag;
  }
  MultipartUpload upload(client, bucket, key, options);
  SG_RETURN_IF_ERROR(upload.Start());
  for (uint64_t offset = 0; offset < size; offset += part_size) {
    SG_ASSIGN_OR_RETURN(std::string part,
                        PreadUpTo(fd.get(), offset, std::min(part_size, size - offset), path));
    SG_RETURN_IF_ERROR(upload.AddPart(std::move(part)));
  }
  return upload.Complete(condition);
}

Status ParallelGet(S3Client& client, const std::string& bucket, const std::string& key,
                   uint64_t size, const TransferOptions& options,
                   const std::function<Status(uint64_t, std::string)>& sink) {
  const uint64_t part_size = ChoosePartSize(size, options.min_part_size);
  BoundedExecutor executor(options.parts_in_flight, options.parts_in_flight);
  for (uint64_t offset = 0; offset < size; offset += part_size) {
    const uint64_t length = std::min(part_size, size - offset);
    SG_RETURN_IF_ERROR(executor.Submit([&, offset, length]() -> Status {
      SG_ASSIGN_OR_RETURN(std::string data,
                          client.GetObject(bucket, key, ByteRange{offset, length}));
      if (data.size() != length) {
        return Status::Corruption("GetObject " + key + " returned " + std::to_string(data.size()) +
                                  " bytes for a range of " + std::to_string(length));
      }
      return sink(offset, std::move(data));
    }));
  }
  return executor.Wait();
}

StatusOr<uint64_t> DownloadFile(S3Client& client, const std::string& bucket, const std::string& key,
                                const std::string& path, const TransferOptions& options) {
  SG_ASSIGN_OR_RETURN(ObjectInfo head, client.HeadObject(bucket, key));
  SG_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0644));
  if (::ftruncate(fd.get(), static_cast<off_t>(head.size)) != 0) {
    return Status::FromErrno(errno, "truncate " + path);
  }
  SG_RETURN_IF_ERROR(ParallelGet(
      client, bucket, key, head.size, options, [&](uint64_t offset, std::string data) -> Status {
        size_t done = 0;
        while (done < data.size()) {
          ssize_t n = ::pwrite(fd.get(), data.data() + done, data.size() - done,
                               static_cast<off_t>(offset + done));
          if (n < 0) {
            if (errno == EINTR) continue;
            return Status::FromErrno(errno, "write " + path);
          }
          done += static_cast<size_t>(n);
        }
        return Status::Ok();
      }));
  if (::fsync(fd.get()) != 0) return Status::FromErrno(errno, "fsync " + path);
  return head.size;
}

Status DownloadInOrder(S3Client& client, const std::string& bucket, const std::string& key,
                       const TransferOptions& options,
                       const std::function<Status(std::string_view)>& consumer) {
  SG_ASSIGN_OR_RETURN(ObjectInfo head, client.HeadObject(bucket, key));
  const uint64_t part_size = ChoosePartSize(head.size, options.min_part_size);
  const int parallel = std::max(1, options.parts_in_flight);
  BoundedExecutor executor(parallel, parallel);
  // At most `parallel` ranges are fetched ahead of the consumer.
  OrderedPipeline<std::string> pipeline(executor, static_cast<size_t>(parallel),
                                        [&](std::string data) { return consumer(data); });
  for (uint64_t offset = 0; offset < head.size; offset += part_size) {
    const uint64_t length = std::min(part_size, head.size - offset);
    SG_RETURN_IF_ERROR(pipeline.Submit([&, offset, length]() -> StatusOr<std::string> {
      SG_ASSIGN_OR_RETURN(std::string data,
                          client.GetObject(bucket, key, ByteRange{offset, length}));
      if (data.size() != length) return Status::Corruption("short range from " + key);
      return data;
    }));
  }
  return pipeline.Finish();
}

}  // namespace sg
