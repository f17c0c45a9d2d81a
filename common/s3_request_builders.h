// The XML bodies of S3 requests, built from their parts with every value
// escaped. BuildS3Address (common/s3_client.h) is the other request builder.
// Internal to common/s3_*.cc.
#pragma once

#include <string>
#include <vector>

#include "common/s3_client.h"

namespace sg::s3_detail {

// DeleteObjects, quiet: only keys that fail are answered.
std::string DeleteObjectsXml(const std::vector<std::string>& keys);
// CreateBucket outside us-east-1.
std::string CreateBucketConfigurationXml(const std::string& region);
// CompleteMultipartUpload: the parts in the order given, etags quoted.
std::string CompleteMultipartUploadXml(const std::vector<PartInfo>& parts);

}  // namespace sg::s3_detail
