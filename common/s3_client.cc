// S3Client: each operation as a call built from its parts (common/s3_request_builders.h),
// signed and sent by the SignedCallExecutor under the S3 answer rules
// (common/s3_answer_rules.h), its answer read by the response parsers
// (common/s3_response_xml.cc).
#include "common/s3_client.h"

#include <charconv>

#include "common/crypto.h"
#include "common/s3_answer_rules.h"
#include "common/s3_request_builders.h"
#include "common/s3_response_xml.h"
#include "common/strings.h"

namespace sg {

using s3_detail::CompleteMultipartUploadXml;
using s3_detail::CreateBucketConfigurationXml;
using s3_detail::DeleteObjectsXml;
using s3_detail::S3Rules;
using s3_detail::Unquote;

namespace {

bool IsAwsEndpoint(const S3ClientOptions& o) { return o.endpoint.empty(); }

void ApplyBodyCheck(const BodyCheck& check, bool& sign_payload, HttpHeaders& headers) {
  sign_payload = check.kind == BodyCheck::Kind::kSigned;
  if (check.kind == BodyCheck::Kind::kContentMd5) {
    headers.emplace_back("Content-MD5", check.content_md5);
  }
}

}  // namespace

bool TransportKeepsBodiesIntact(const std::string& endpoint) {
  if (endpoint.empty()) return true;  // AWS: https
  const std::string lower = ToLower(endpoint);
  if (lower.starts_with("https://")) return true;
  if (!lower.starts_with("http://")) return false;
  std::string_view host = std::string_view(lower).substr(7);
  host = host.substr(0, host.find_first_of("/?#"));
  if (host.starts_with("[")) {  // [IPv6]:port
    const size_t close = host.find(']');
    host = close == std::string_view::npos ? std::string_view() : host.substr(1, close - 1);
  } else {
    host = host.substr(0, host.find(':'));
  }
  const bool ipv4_loopback =
      host.starts_with("127.") && host.find_first_not_of("0123456789.") == std::string_view::npos;
  return ipv4_loopback || host == "localhost" || host == "::1";
}

S3Client::S3Client(HttpTransport& transport, CredentialsProvider& credentials, Clock& clock,
                   S3ClientOptions options, UniformRandom random)
    : options_(std::move(options)),
      executor_(transport, credentials, clock, {"s3", options_.region, "S3", options_.retry},
                std::move(random)) {}

StatusOr<HttpResponse> S3Client::Execute(Call call) {
  const S3Address address = BuildS3Address(options_, call.bucket, call.key, call.query);
  const std::string resource = call.bucket + (call.key.empty() ? "" : "/" + call.key);
  SignedRequest request;
  request.method = std::move(call.method);
  request.url = address.url;
  request.host = address.host;
  request.path = address.path;
  request.query = std::move(call.query);
  request.headers = std::move(call.headers);
  request.body = std::move(call.body);
  request.sign_payload = call.sign_payload;
  request.timeout = std::chrono::milliseconds(0);  // large bodies: the stall timeout governs
  request.stall_timeout = options_.stall_timeout;
  request.answer_timeout = options_.answer_timeout;
  request.give_up_after = options_.give_up_after;
  request.what = call.operation + " " + resource;
  request.body_sink = std::move(call.body_sink);
  return executor_.Execute(std::move(request),
                           S3Rules(std::move(call.operation), resource, call.error_in_200));
}

StatusOr<S3PutResult> S3Client::PutObject(const std::string& bucket, const std::string& key,
                                          std::string body, const PutCondition& condition,
                                          const BodyCheck& check) {
  Call call("PutObject", "PUT", bucket, key);
  call.body = std::move(body);
  if (condition.kind == PutCondition::Kind::kCreateOnly) {
    call.headers.emplace_back("If-None-Match", "*");
  } else if (condition.kind == PutCondition::Kind::kIfMatch) {
    // RFC 7232 wants the quoted form, which AWS accepts; Ceph RGW (16.x)
    // compares the header literally against the bare etag.
    call.headers.emplace_back(
        "If-Match", IsAwsEndpoint(options_) ? "\"" + condition.etag + "\"" : condition.etag);
  }
  // A small body is signed whatever the caller asks: its hash costs nothing.
  ApplyBodyCheck(call.body.size() <= (1 << 20) ? BodyCheck::Signed() : check, call.sign_payload,
                 call.headers);
  // A create-only PUT needs its body after sending (below); others give it up.
  const bool create_only = condition.kind == PutCondition::Kind::kCreateOnly;
  auto resp = create_only ? Execute(call) : Execute(std::move(call));
  if (!resp.ok() && resp.status().Is(StatusCode::kPreconditionFailed) && create_only) {
    // If an earlier attempt's answer was lost after the server stored the
    // object, the retry meets our own write: same bytes, same MD5 etag.
    auto head = HeadObject(bucket, key);
    if (head.ok() && head->etag == HexEncode(Md5(call.body))) return S3PutResult{head->etag};
  }
  if (!resp.ok()) return resp.status();
  return S3PutResult{Unquote(resp->Header("etag"))};
}

StatusOr<std::string> S3Client::GetObject(const std::string& bucket, const std::string& key,
                                          std::optional<ByteRange> range, ObjectInfo* info) {
  Call call("GetObject", "GET", bucket, key);
  if (range) {
    std::string value = "bytes=" + std::to_string(range->offset) + "-";
    if (range->length) {
      if (*range->length == 0) {
        // A zero-length range cannot be written in HTTP; S3 semantics: empty.
        SG_ASSIGN_OR_RETURN(ObjectInfo head, HeadObject(bucket, key));
        if (info) *info = head;
        if (range->offset >= head.size && head.size > 0) {
          return Status::OutOfRange("range starts past the end of " + key);
        }
        return std::string();
      }
      value += std::to_string(range->offset + *range->length - 1);
    }
    call.headers.emplace_back("Range", value);
  }
  StatusOr<HttpResponse> resp = Execute(std::move(call));
  if (!resp.ok()) {
    // An empty object has no satisfiable range; S3 answers 416 for offset 0.
    if (range && resp.status().Is(StatusCode::kOutOfRange) && range->offset == 0) {
      auto head = HeadObject(bucket, key);
      if (head.ok() && head->size == 0) {
        if (info) *info = *head;
        return std::string();
      }
    }
    return resp.status();
  }
  if (info) {
    info->key = key;
    info->etag = Unquote(resp->Header("etag"));
    const std::string content_range = resp->Header("content-range");  // bytes a-b/total
    if (const size_t slash = content_range.rfind('/'); slash != std::string::npos) {
      const std::string total = content_range.substr(slash + 1);
      auto [end, ec] = std::from_chars(total.data(), total.data() + total.size(), info->size);
      if (ec != std::errc() || end != total.data() + total.size()) {
        return Status::Corruption("GetObject " + bucket + "/" + key + ": Content-Range \"" +
                                  content_range + "\" does not end in a size");
      }
    } else {
      info->size = resp->body.size();
    }
  }
  return std::move(resp->body);
}

Status S3Client::GetObjectTo(const std::string& bucket, const std::string& key, ByteRange range,
                             const BodySink& sink) {
  if (!range.length || *range.length == 0) {
    // Not a range HTTP can name by its last byte: read whole, hand over whole.
    SG_ASSIGN_OR_RETURN(std::string body, GetObject(bucket, key, range));
    return sink(0, body);
  }
  Call call("GetObject", "GET", bucket, key);
  call.headers.emplace_back("Range", "bytes=" + std::to_string(range.offset) + "-" +
                                         std::to_string(range.offset + *range.length - 1));
  call.body_sink = sink;
  StatusOr<HttpResponse> resp = Execute(std::move(call));
  if (!resp.ok()) {
    // An empty object has no satisfiable range; S3 answers 416 for offset 0.
    if (resp.status().Is(StatusCode::kOutOfRange) && range.offset == 0) {
      auto head = HeadObject(bucket, key);
      if (head.ok() && head->size == 0) return Status::Ok();
    }
    return resp.status();
  }
  // A transport that does not stream keeps the body (HttpRequest::body_sink).
  return resp->body.empty() ? Status::Ok() : sink(0, resp->body);
}

StatusOr<ObjectInfo> S3Client::HeadObject(const std::string& bucket, const std::string& key) {
  SG_ASSIGN_OR_RETURN(HttpResponse resp, Execute(Call("HeadObject", "HEAD", bucket, key)));
  ObjectInfo info;
  info.key = key;
  info.etag = Unquote(resp.Header("etag"));
  const std::string length = resp.Header("content-length");
  if (!length.empty()) {
    // A malformed Content-Length is the server's fault: say so, never throw.
    auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), info.size);
    if (ec != std::errc() || end != length.data() + length.size()) {
      return Status::Corruption("HeadObject " + bucket + "/" + key + ": Content-Length \"" +
                                length + "\" is not a number");
    }
  }
  if (auto t = ParseAwsTime(resp.Header("last-modified"))) info.modified = *t;
  return info;
}

StatusOr<ListPage> S3Client::ListObjectsV2(const std::string& bucket, const std::string& prefix,
                                           const std::string& continuation_token, int max_keys) {
  Call call("ListObjectsV2", "GET", bucket, "");
  call.query = {{"list-type", "2"}, {"prefix", prefix}, {"max-keys", std::to_string(max_keys)}};
  if (!continuation_token.empty())
    call.query.emplace_back("continuation-token", continuation_token);
  SG_ASSIGN_OR_RETURN(HttpResponse resp, Execute(std::move(call)));
  SG_ASSIGN_OR_RETURN(ListPage page, ParseListObjectsV2Xml(resp.body, "ListObjectsV2 " + bucket));
  if (!page.next_token.empty() && page.next_token == continuation_token) {
    return Status::Corruption("ListObjectsV2 " + bucket +
                              ": the listing does not advance (same continuation token)");
  }
  for (const ObjectInfo& o : page.objects) {
    if (!o.key.starts_with(prefix)) {
      return Status::Corruption("ListObjectsV2 " + bucket + ": key \"" + o.key +
                                "\" is outside the requested prefix \"" + prefix + "\"");
    }
  }
  return page;
}

Status S3Client::DeleteObject(const std::string& bucket, const std::string& key) {
  auto resp = Execute(Call("DeleteObject", "DELETE", bucket, key));
  if (!resp.ok() && !resp.status().Is(StatusCode::kNotFound)) return resp.status();
  return Status::Ok();
}

Status S3Client::DeleteObjects(const std::string& bucket, const std::vector<std::string>& keys) {
  if (keys.empty()) return Status::Ok();
  if (keys.size() > 1000) return Status::InvalidArgument("DeleteObjects takes at most 1000 keys");
  std::string body = DeleteObjectsXml(keys);
  Call call("DeleteObjects", "POST", bucket, "", {{"delete", ""}});
  call.headers.emplace_back("Content-MD5", Base64Encode(Md5(body)));
  call.headers.emplace_back("Content-Type", "application/xml");
  call.body = std::move(body);
  SG_ASSIGN_OR_RETURN(HttpResponse resp, Execute(std::move(call)));
  SG_ASSIGN_OR_RETURN(std::optional<DeleteFailure> failed,
                      ParseDeleteResultXml(resp.body, "DeleteObjects " + bucket));
  if (failed) {
    failed->error.http_status = resp.status;
    return S3ErrorStatus("DeleteObjects", bucket + "/" + failed->key, failed->error);
  }
  return Status::Ok();
}

Status S3Client::CreateBucket(const std::string& bucket) {
  Call call("CreateBucket", "PUT", bucket, "");
  if (options_.region != "us-east-1") {
    call.body = CreateBucketConfigurationXml(options_.region);
  }
  auto resp = Execute(std::move(call));
  if (!resp.ok() && resp.status().reason() != "BucketAlreadyOwnedByYou") return resp.status();
  return Status::Ok();
}

StatusOr<std::string> S3Client::CreateMultipartUpload(const std::string& bucket,
                                                      const std::string& key) {
  SG_ASSIGN_OR_RETURN(HttpResponse resp, Execute(Call("CreateMultipartUpload", "POST", bucket, key,
                                                      {{"uploads", ""}})));
  return ParseInitiateMultipartUploadXml(resp.body, "CreateMultipartUpload " + key);
}

StatusOr<std::string> S3Client::UploadPart(const std::string& bucket, const std::string& key,
                                           const std::string& upload_id, int part_number,
                                           std::string body, const BodyCheck& check) {
  Call call("UploadPart", "PUT", bucket, key,
            {{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}});
  call.body = std::move(body);
  // With a signed SHA-256, a part damaged on the way is refused
  // (Ceph RGW 16 answers XAmzContentSHA256Mismatch).
  ApplyBodyCheck(check, call.sign_payload, call.headers);
  SG_ASSIGN_OR_RETURN(HttpResponse resp, Execute(std::move(call)));
  std::string etag = Unquote(resp.Header("etag"));
  if (etag.empty()) return Status::Corruption("UploadPart " + key + ": no ETag in the answer");
  return etag;
}

StatusOr<S3PutResult> S3Client::CompleteMultipartUpload(const std::string& bucket,
                                                        const std::string& key,
                                                        const std::string& upload_id,
                                                        const std::vector<PartInfo>& parts,
                                                        const PutCondition& condition) {
  std::string body = CompleteMultipartUploadXml(parts);
  Call call("CompleteMultipartUpload", "POST", bucket, key, {{"uploadId", upload_id}});
  call.headers.emplace_back("Content-Type", "application/xml");
  if (condition.kind == PutCondition::Kind::kCreateOnly) {
    call.headers.emplace_back("If-None-Match", "*");
  }
  call.body = std::move(body);
  call.error_in_200 = true;
  SG_ASSIGN_OR_RETURN(HttpResponse resp, Execute(std::move(call)));
  SG_ASSIGN_OR_RETURN(std::string etag,
                      ParseCompleteMultipartUploadXml(resp.body, "CompleteMultipartUpload " + key));
  if (etag.empty()) {
    // Some gateways (Ceph RGW 16) answer with an empty ETag; ask for it.
    SG_ASSIGN_OR_RETURN(ObjectInfo head, HeadObject(bucket, key));
    etag = head.etag;
  }
  return S3PutResult{etag};
}

Status S3Client::AbortMultipartUpload(const std::string& bucket, const std::string& key,
                                      const std::string& upload_id) {
  auto resp =
      Execute(Call("AbortMultipartUpload", "DELETE", bucket, key, {{"uploadId", upload_id}}));
  if (!resp.ok() && !resp.status().Is(StatusCode::kNotFound)) return resp.status();
  return Status::Ok();
}

StatusOr<std::vector<MultipartUploadInfo>> S3Client::ListMultipartUploads(
    const std::string& bucket, const std::string& prefix) {
  std::vector<MultipartUploadInfo> out;
  std::string key_marker, upload_marker;
  while (true) {
    Call call("ListMultipartUploads", "GET", bucket, "", {{"uploads", ""}, {"prefix", prefix}});
    if (!key_marker.empty()) call.query.emplace_back("key-marker", key_marker);
    if (!upload_marker.empty()) call.query.emplace_back("upload-id-marker", upload_marker);
    SG_ASSIGN_OR_RETURN(HttpResponse resp, Execute(std::move(call)));
    SG_ASSIGN_OR_RETURN(MultipartUploadsPage page, ParseListMultipartUploadsXml(resp.body));
    out.insert(out.end(), std::make_move_iterator(page.uploads.begin()),
               std::make_move_iterator(page.uploads.end()));
    if (!page.truncated) break;
    if (page.next_key_marker == key_marker && page.next_upload_id_marker == upload_marker) {
      return Status::Corruption(
          "ListMultipartUploads: the listing does not advance (same markers)");
    }
    key_marker = std::move(page.next_key_marker);
    upload_marker = std::move(page.next_upload_id_marker);
  }
  return out;
}

StatusOr<std::vector<PartInfo>> S3Client::ListParts(const std::string& bucket,
                                                    const std::string& key,
                                                    const std::string& upload_id) {
  std::vector<PartInfo> out;
  std::string marker;
  while (true) {
    Call call("ListParts", "GET", bucket, key, {{"uploadId", upload_id}});
    if (!marker.empty()) call.query.emplace_back("part-number-marker", marker);
    SG_ASSIGN_OR_RETURN(HttpResponse resp, Execute(std::move(call)));
    SG_ASSIGN_OR_RETURN(PartsPage page, ParseListPartsXml(resp.body, "ListParts " + key));
    out.insert(out.end(), std::make_move_iterator(page.parts.begin()),
               std::make_move_iterator(page.parts.end()));
    if (!page.truncated) break;
    if (page.next_part_number_marker == marker) {
      return Status::Corruption("ListParts " + key +
                                ": the listing does not advance (same marker)");
    }
    marker = std::move(page.next_part_number_marker);
  }
  return out;
}

}  // namespace sg
