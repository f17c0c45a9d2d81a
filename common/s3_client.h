// The S3 REST API: the operations spotguard needs, errors parsed into Status
// values whose reason() is the S3 error code ("NoSuchKey", "SlowDown",
// "PreconditionFailed", ...).
//
// This file only builds requests and reads answers (BuildS3Address,
// ClassifyS3Response, the Parse* functions); signing, sending, retrying and
// clock-skew correction are the SignedCallExecutor's (aws_call.h).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/aws_call.h"
#include "common/aws_credentials.h"
#include "common/clock.h"
#include "common/http.h"
#include "common/object_store.h"
#include "common/retry.h"
#include "common/status.h"

namespace sg {

struct S3ClientOptions {
  std::string region = "us-east-1";
  // Custom endpoint ("http://127.0.0.1:17480"); empty: AWS, https://s3.<region>.amazonaws.com.
  std::string endpoint;
  // Path-style addressing (endpoint/bucket/key). Always used for custom
  // endpoints and for bucket names with dots; AWS otherwise gets
  // virtual-hosted style (bucket.s3.<region>.amazonaws.com/key).
  bool force_path_style = false;
  RetryPolicy retry;
  std::chrono::seconds stall_timeout{60};
  // Per attempt and per call (SignedRequest::answer_timeout, give_up_after);
  // 0: none, as the agent's own store has (docs/design.md §12).
  std::chrono::milliseconds answer_timeout{0};
  std::chrono::milliseconds give_up_after{0};
};

// How the server checks the body of a PUT or a part as it arrives
// (docs/design.md §4, "What an upload hashes"):
//   kSigned     its SHA-256 in the signature (x-amz-content-sha256), which
//               the server recomputes: one pass of SHA-256 over the body here;
//   kContentMd5 UNSIGNED-PAYLOAD and the caller's Content-MD5 (base64);
//   kUnsigned   UNSIGNED-PAYLOAD alone: for bodies whose bytes the caller's
//               own digests cover end to end, sent where nothing can change
//               them on the way (https: TLS's record MACs; loopback).
struct BodyCheck {
  enum class Kind { kSigned, kContentMd5, kUnsigned };
  Kind kind = Kind::kSigned;
  std::string content_md5;  // kContentMd5: base64

  static BodyCheck Signed() { return {}; }
  static BodyCheck ContentMd5(std::string base64) {
    return {Kind::kContentMd5, std::move(base64)};
  }
  static BodyCheck Unsigned() { return {Kind::kUnsigned, ""}; }
};

// Whether the way to `endpoint` ("" for AWS) keeps a body's bytes intact
// without the server's own check: https (TLS authenticates every record) or
// a loopback address (the bytes never leave this host's memory).
bool TransportKeepsBodiesIntact(const std::string& endpoint);

// code: "NoSuchKey"; derived from the status when there is no body.
using S3ErrorInfo = AwsErrorInfo;

// Parses an <Error> document; nullopt when `body` is not one.
std::optional<S3ErrorInfo> ParseS3ErrorXml(std::string_view body);
// What an attempt's result means for retrying.
Outcome ClassifyS3Response(const StatusOr<HttpResponse>& response);
// The Status for a failed S3 call: the code follows the S3 error, reason() is
// the S3 error code, the message names the operation, bucket and key.
Status S3ErrorStatus(const std::string& operation, const std::string& resource,
                     const S3ErrorInfo& error);

struct S3Address {
  std::string url;   // full URL with the encoded path and query
  std::string host;  // Host header value
  std::string path;  // raw path as signed
};
S3Address BuildS3Address(const S3ClientOptions& options, const std::string& bucket,
                         const std::string& key,
                         const std::vector<std::pair<std::string, std::string>>& query);

struct S3PutResult {
  std::string etag;  // without quotes
};

struct MultipartUploadInfo {
  std::string key;
  std::string upload_id;
  std::string initiated;  // ISO 8601
};

struct PartInfo {
  int number = 0;
  std::string etag;  // without quotes
  uint64_t size = 0;
};

// Pure parsers of S3's XML answers (used by S3Client, exposed for tests and
// fuzzing). `what` names the request in error messages; a body that is not
// XML or lacks the result element is Corruption.
StatusOr<ListPage> ParseListObjectsV2Xml(std::string_view body, const std::string& what);
// The UploadId; Corruption when there is none.
StatusOr<std::string> ParseInitiateMultipartUploadXml(std::string_view body,
                                                      const std::string& what);
// The ETag without quotes ("" when the answer carries none, as Ceph RGW 16 does).
StatusOr<std::string> ParseCompleteMultipartUploadXml(std::string_view body,
                                                      const std::string& what);
struct MultipartUploadsPage {
  std::vector<MultipartUploadInfo> uploads;
  bool truncated = false;
  std::string next_key_marker;
  std::string next_upload_id_marker;
};
StatusOr<MultipartUploadsPage> ParseListMultipartUploadsXml(std::string_view body);
struct PartsPage {
  std::vector<PartInfo> parts;
  bool truncated = false;
  std::string next_part_number_marker;
};
StatusOr<PartsPage> ParseListPartsXml(std::string_view body, const std::string& what);
// The first key a DeleteObjects answer reports as not deleted, if any.
struct DeleteFailure {
  std::string key;
  S3ErrorInfo error;
};
StatusOr<std::optional<DeleteFailure>> ParseDeleteResultXml(std::string_view body,
                                                            const std::string& what);

class S3Client {
 public:
  S3Client(HttpTransport& transport, CredentialsProvider& credentials, Clock& clock,
           S3ClientOptions options, UniformRandom random = DefaultRandom());

  // `condition`: If-None-Match: * or If-Match. `check`: how the server
  // checks the body; a body of 1 MiB or less is always signed.
  StatusOr<S3PutResult> PutObject(const std::string& bucket, const std::string& key,
                                  std::string body, const PutCondition& condition = {},
                                  const BodyCheck& check = {});
  StatusOr<std::string> GetObject(const std::string& bucket, const std::string& key,
                                  std::optional<ByteRange> range = {}, ObjectInfo* info = nullptr);
  // The `range.length` bytes at `range.offset` handed to `sink` as they
  // arrive (ObjectStore::GetTo); a retried attempt hands them again from
  // offset 0.
  Status GetObjectTo(const std::string& bucket, const std::string& key,
                     ByteRange range, const BodySink& sink);
  StatusOr<ObjectInfo> HeadObject(const std::string& bucket, const std::string& key);
  StatusOr<ListPage> ListObjectsV2(const std::string& bucket, const std::string& prefix,
                                   const std::string& continuation_token, int max_keys = 1000);
  Status DeleteObject(const std::string& bucket, const std::string& key);
  // Deletes up to 1000 keys in one request; a key that fails is an error.
  Status DeleteObjects(const std::string& bucket, const std::vector<std::string>& keys);
  Status CreateBucket(const std::string& bucket);

  StatusOr<std::string> CreateMultipartUpload(const std::string& bucket, const std::string& key);
  // `check`: how the server checks the part.
  StatusOr<std::string> UploadPart(const std::string& bucket, const std::string& key,
                                   const std::string& upload_id, int part_number, std::string body,
                                   const BodyCheck& check);
  StatusOr<S3PutResult> CompleteMultipartUpload(const std::string& bucket, const std::string& key,
                                                const std::string& upload_id,
                                                const std::vector<PartInfo>& parts,
                                                const PutCondition& condition = {});
  Status AbortMultipartUpload(const std::string& bucket, const std::string& key,
                              const std::string& upload_id);
  StatusOr<std::vector<MultipartUploadInfo>> ListMultipartUploads(const std::string& bucket,
                                                                  const std::string& prefix);
  StatusOr<std::vector<PartInfo>> ListParts(const std::string& bucket, const std::string& key,
                                            const std::string& upload_id);

  // How far the server's clock is ahead of ours, learnt from a
  // RequestTimeTooSkewed answer and applied to every later signature.
  std::chrono::seconds clock_offset() const { return executor_.clock_offset(); }
  const S3ClientOptions& options() const { return options_; }

 private:
  struct Call {
    Call(std::string op, std::string m, std::string b, std::string k,
         std::vector<std::pair<std::string, std::string>> q = {})
        : operation(std::move(op)),
          method(std::move(m)),
          bucket(std::move(b)),
          key(std::move(k)),
          query(std::move(q)) {}
    std::string operation;  // "PutObject", for messages
    std::string method;
    std::string bucket;
    std::string key;
    std::vector<std::pair<std::string, std::string>> query;
    HttpHeaders headers;
    std::string body;
    bool sign_payload = true;   // else UNSIGNED-PAYLOAD (BodyCheck)
    bool error_in_200 = false;  // CompleteMultipartUpload may answer 200 with <Error>
    BodySink body_sink;         // streams the body of a 2xx answer
  };
  // Builds the signed request for `call` and hands it to the executor.
  StatusOr<HttpResponse> Execute(Call call);

  const S3ClientOptions options_;
  SignedCallExecutor executor_;
};

}  // namespace sg
