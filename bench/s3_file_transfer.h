// Whole files to and from S3 through common/s3_multipart.h, for
// bench/s3_transfer_bench.cc only (the product moves snapshots through
// ObjectStore): the "engine" rows of bench/sections/01-limits.sh.
#pragma once

#include <cstdint>
#include <string>

#include "common/s3_client.h"
#include "common/s3_multipart.h"

namespace sg {

// Uploads a local file: one PUT when it fits in a part, else multipart.
// Returns the etag.
StatusOr<std::string> UploadFile(S3Client& client, const std::string& bucket,
                                 const std::string& key, const std::string& path,
                                 const TransferOptions& options,
                                 const PutCondition& condition = {});

// Downloads the object into `path` (created or truncated) in parallel
// ranges, writing each in place with pwrite, then fsyncs. Returns the number
// of bytes.
StatusOr<uint64_t> DownloadFile(S3Client& client, const std::string& bucket, const std::string& key,
                                const std::string& path, const TransferOptions& options);

}  // namespace sg
