#include "bench/s3_file_transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/bounded_executor.h"
#include "common/crypto.h"
#include "common/files.h"

namespace sg {

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
                        client.PutObject(bucket, key, std::move(body), condition,
                                         BodyCheck::ContentMd5(md5)));
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

namespace {

// Fetches the object in ranges with up to parts_in_flight requests at once and
// hands each piece to `sink` (called from several threads, in any order).
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

}  // namespace

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

}  // namespace sg
