// libFuzzer target: the XML answers of S3 (ListObjectsV2, Initiate/Complete
// MultipartUpload, ListMultipartUploads, ListParts, DeleteObjects, <Error>)
// and of Auto Scaling (DescribeAutoScalingInstances, <ErrorResponse>).
// Byte 0 picks the parser; the rest is the body.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/autoscaling_client.h"
#include "common/s3_client.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 8) {
    case 0: {
      auto page = sg::ParseListObjectsV2Xml(body, "fuzz");
      if (page.ok() && !page->next_token.empty()) {
        SG_FUZZ_CHECK(body.find("NextContinuationToken") != std::string::npos,
                      "a continuation token from nowhere");
      }
      break;
    }
    case 1: {
      auto id = sg::ParseInitiateMultipartUploadXml(body, "fuzz");
      if (id.ok()) SG_FUZZ_CHECK(!id->empty(), "an empty UploadId was accepted");
      break;
    }
    case 2:
      (void)sg::ParseCompleteMultipartUploadXml(body, "fuzz");
      break;
    case 3: {
      auto page = sg::ParseListMultipartUploadsXml(body);
      if (page.ok() && page->truncated) {
        SG_FUZZ_CHECK(!page->next_key_marker.empty() || !page->next_upload_id_marker.empty(),
                      "a truncated listing without markers was accepted");
      }
      break;
    }
    case 4: {
      auto page = sg::ParseListPartsXml(body, "fuzz");
      if (page.ok() && page->truncated) {
        SG_FUZZ_CHECK(!page->next_part_number_marker.empty(),
                      "a truncated part listing without marker was accepted");
      }
      break;
    }
    case 5:
      (void)sg::ParseDeleteResultXml(body, "fuzz");
      break;
    case 6:
      (void)sg::ParseS3ErrorXml(body);
      (void)sg::ParseAutoScalingErrorXml(body);
      break;
    case 7:
      (void)sg::ParseDescribeAutoScalingInstancesXml(body);
      break;
  }
  return 0;
}
