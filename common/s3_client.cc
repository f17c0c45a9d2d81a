#include "common/s3_client.h"

#include <charconv>
#include <pugixml.hpp>

#include "common/crypto.h"
#include "common/sigv4.h"
#include "common/strings.h"

namespace sg {
namespace {

std::string Unquote(std::string s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

S3ErrorInfo ErrorOf(const HttpResponse& resp) {
  static const std::map<long, std::string> kStatusCodes = {
      {403, "AccessDenied"},       {404, "NoSuchKey"},    {409, "ConditionalRequestConflict"},
      {412, "PreconditionFailed"}, {416, "InvalidRange"}, {500, "InternalError"},
      {503, "ServiceUnavailable"},
  };
  S3ErrorInfo e = ParseS3ErrorXml(resp.body).value_or(S3ErrorInfo{});
  CompleteErrorInfo(e, resp, kStatusCodes, "x-amz-request-id");
  return e;
}

// CompleteMultipartUpload can fail after sending 200 OK, with an <Error> in
// the body: the answer as the 5xx it stands for, so it is judged (and
// retried) like one. nullopt for any other answer.
std::optional<HttpResponse> FailureInside200(const HttpResponse& resp) {
  if (resp.status < 200 || resp.status >= 300) return std::nullopt;
  auto error = ParseS3ErrorXml(resp.body);
  if (!error) return std::nullopt;
  HttpResponse failed = resp;
  failed.status = error->code == "SlowDown" ? 503 : 500;
  return failed;
}

// How the executor reads S3's answers to one call.
AnswerRules S3Rules(std::string operation, std::string resource, bool error_in_200) {
  AnswerRules rules;
  rules.classify = [error_in_200](const StatusOr<HttpResponse>& resp) {
    if (error_in_200 && resp.ok()) {
      if (auto failed = FailureInside200(*resp)) return ClassifyS3Response(*failed);
    }
    return ClassifyS3Response(resp);
  };
  rules.error = [operation = std::move(operation), resource = std::move(resource),
                 error_in_200](const HttpResponse& resp) {
    std::optional<HttpResponse> failed = error_in_200 ? FailureInside200(resp) : std::nullopt;
    return S3ErrorStatus(operation, resource, ErrorOf(failed ? *failed : resp));
  };
  return rules;
}

bool IsAwsEndpoint(const S3ClientOptions& o) { return o.endpoint.empty(); }

std::string ChildText(const pugi::xml_node& node, const char* name) {
  return node.child(name).text().as_string();
}

StatusOr<pugi::xml_document> ParseXml(std::string_view body, const std::string& what) {
  pugi::xml_document doc;
  auto result = doc.load_buffer(body.data(), body.size());
  if (!result) {
    return Status::Corruption(what + ": the S3 answer is not XML (" +
                              std::string(result.description()) + ")");
  }
  return doc;
}

}  // namespace

std::optional<S3ErrorInfo> ParseS3ErrorXml(std::string_view body) {
  return ParseAwsErrorXml(body, "Error");
}

StatusOr<ListPage> ParseListObjectsV2Xml(std::string_view body, const std::string& what) {
  SG_ASSIGN_OR_RETURN(pugi::xml_document doc, ParseXml(body, what));
  pugi::xml_node root = doc.child("ListBucketResult");
  if (!root) return Status::Corruption(what + ": no ListBucketResult");
  ListPage page;
  for (pugi::xml_node c : root.children("Contents")) {
    ObjectInfo o;
    o.key = ChildText(c, "Key");
    o.size = c.child("Size").text().as_ullong();
    o.etag = Unquote(ChildText(c, "ETag"));
    if (auto t = ParseAwsTime(ChildText(c, "LastModified"))) o.modified = *t;
    page.objects.push_back(std::move(o));
  }
  if (std::string(root.child("IsTruncated").text().as_string()) == "true") {
    page.next_token = ChildText(root, "NextContinuationToken");
    if (page.next_token.empty()) {
      return Status::Corruption(what + ": truncated listing without NextContinuationToken");
    }
  }
  return page;
}

StatusOr<std::string> ParseInitiateMultipartUploadXml(std::string_view body,
                                                      const std::string& what) {
  SG_ASSIGN_OR_RETURN(pugi::xml_document doc, ParseXml(body, what));
  std::string id = ChildText(doc.child("InitiateMultipartUploadResult"), "UploadId");
  if (id.empty()) return Status::Corruption(what + ": no UploadId");
  return id;
}

StatusOr<std::string> ParseCompleteMultipartUploadXml(std::string_view body,
                                                      const std::string& what) {
  SG_ASSIGN_OR_RETURN(pugi::xml_document doc, ParseXml(body, what));
  pugi::xml_node root = doc.child("CompleteMultipartUploadResult");
  if (!root) return Status::Corruption(what + ": no CompleteMultipartUploadResult");
  return Unquote(ChildText(root, "ETag"));
}

StatusOr<MultipartUploadsPage> ParseListMultipartUploadsXml(std::string_view body) {
  SG_ASSIGN_OR_RETURN(pugi::xml_document doc, ParseXml(body, "ListMultipartUploads"));
  pugi::xml_node root = doc.child("ListMultipartUploadsResult");
  if (!root) return Status::Corruption("ListMultipartUploads: no ListMultipartUploadsResult");
  MultipartUploadsPage page;
  for (pugi::xml_node u : root.children("Upload")) {
    page.uploads.push_back(
        {ChildText(u, "Key"), ChildText(u, "UploadId"), ChildText(u, "Initiated")});
  }
  page.truncated = std::string(root.child("IsTruncated").text().as_string()) == "true";
  if (page.truncated) {
    page.next_key_marker = ChildText(root, "NextKeyMarker");
    page.next_upload_id_marker = ChildText(root, "NextUploadIdMarker");
    if (page.next_key_marker.empty() && page.next_upload_id_marker.empty()) {
      return Status::Corruption("ListMultipartUploads: truncated listing without markers");
    }
  }
  return page;
}

StatusOr<PartsPage> ParseListPartsXml(std::string_view body, const std::string& what) {
  SG_ASSIGN_OR_RETURN(pugi::xml_document doc, ParseXml(body, what));
  pugi::xml_node root = doc.child("ListPartsResult");
  if (!root) return Status::Corruption(what + ": no ListPartsResult");
  PartsPage page;
  for (pugi::xml_node p : root.children("Part")) {
    page.parts.push_back({p.child("PartNumber").text().as_int(), Unquote(ChildText(p, "ETag")),
                          p.child("Size").text().as_ullong()});
  }
  page.truncated = std::string(root.child("IsTruncated").text().as_string()) == "true";
  if (page.truncated) {
    page.next_part_number_marker = ChildText(root, "NextPartNumberMarker");
    if (page.next_part_number_marker.empty()) {
      return Status::Corruption(what + ": truncated listing without marker");
    }
  }
  return page;
}

StatusOr<std::optional<DeleteFailure>> ParseDeleteResultXml(std::string_view body,
                                                            const std::string& what) {
  SG_ASSIGN_OR_RETURN(pugi::xml_document doc, ParseXml(body, what));
  for (pugi::xml_node e : doc.child("DeleteResult").children("Error")) {
    DeleteFailure f;
    f.key = ChildText(e, "Key");
    f.error.code = ChildText(e, "Code");
    f.error.message = ChildText(e, "Message");
    return std::optional<DeleteFailure>(std::move(f));
  }
  return std::optional<DeleteFailure>();
}

Outcome ClassifyS3Response(const StatusOr<HttpResponse>& response) {
  static const ErrorOutcomes kOutcomes = {
      .clock_skew = {"RequestTimeTooSkewed"},
      .throttled = {"SlowDown", "Throttling", "RequestLimitExceeded"},
      // ConditionalRequestConflict: a conflicting conditional write is in
      // progress, and AWS asks to retry.
      .server_error = {"ConditionalRequestConflict", "RequestTimeout", "InternalError"},
      // Not 501 (NotImplemented) or 505: retrying cannot help there.
      .server_failed = [](long s) { return s == 500 || s == 502 || s == 503 || s == 504; }};
  // S3Rules checks <Error> in the 200s where S3 sends them.
  return ClassifyAwsAnswer(response, ErrorOf, kOutcomes);
}

Status S3ErrorStatus(const std::string& operation, const std::string& resource,
                     const S3ErrorInfo& e) {
  static const ErrorCodeGroups kCodes = {
      {StatusCode::kNotFound, {"NoSuchKey", "NoSuchBucket", "NoSuchUpload"}},
      {StatusCode::kPreconditionFailed, {"PreconditionFailed", "ConditionalRequestConflict"}},
      {StatusCode::kOutOfRange, {"InvalidRange"}},
      {StatusCode::kInvalidArgument,
       {"InvalidPart", "InvalidPartOrder", "EntityTooSmall", "EntityTooLarge"}},
      {StatusCode::kCorruption, {"BadDigest", "InvalidDigest"}},
  };
  return AwsErrorStatus(AwsErrorCode(e, kCodes), operation + " " + resource, e);
}

S3Address BuildS3Address(const S3ClientOptions& o, const std::string& bucket,
                         const std::string& key,
                         const std::vector<std::pair<std::string, std::string>>& query) {
  std::string scheme = "https://";
  std::string authority;
  if (!o.endpoint.empty()) {
    const size_t sep = o.endpoint.find("://");
    scheme = o.endpoint.substr(0, sep + 3);
    authority = o.endpoint.substr(sep + 3);
    while (!authority.empty() && authority.back() == '/') authority.pop_back();
  } else {
    authority = "s3." + o.region + ".amazonaws.com";
  }
  // Dots in a bucket name break the TLS wildcard of virtual-hosted names.
  const bool path_style = o.force_path_style || !o.endpoint.empty() ||
                          bucket.find('.') != std::string::npos || bucket.empty();
  S3Address a;
  if (path_style) {
    a.host = authority;
    a.path = "/" + bucket + (key.empty() ? "" : "/" + key);
    if (bucket.empty()) a.path = "/";
  } else {
    a.host = bucket + "." + authority;
    a.path = "/" + key;
  }
  a.url = scheme + a.host + UriEncode(a.path, /*keep_slash=*/true);
  if (!query.empty()) a.url += "?" + CanonicalQueryString(query);
  return a;
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
  request.what = call.operation + " " + resource;
  return executor_.Execute(std::move(request),
                           S3Rules(std::move(call.operation), resource, call.error_in_200));
}

StatusOr<S3PutResult> S3Client::PutObject(const std::string& bucket, const std::string& key,
                                          std::string body, const PutCondition& condition,
                                          const std::string& content_md5) {
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
  if (!content_md5.empty()) call.headers.emplace_back("Content-MD5", content_md5);
  call.sign_payload = call.body.size() <= (1 << 20);
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
  std::string body = "<Delete><Quiet>true</Quiet>";
  for (const std::string& k : keys) body += "<Object><Key>" + XmlEscape(k) + "</Key></Object>";
  body += "</Delete>";
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
    call.body = "<CreateBucketConfiguration><LocationConstraint>" + XmlEscape(options_.region) +
                "</LocationConstraint></CreateBucketConfiguration>";
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
                                           std::string body, const std::string& content_md5) {
  Call call("UploadPart", "PUT", bucket, key,
            {{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}});
  call.body = std::move(body);
  call.sign_payload = false;  // Content-MD5 protects the body; no second pass to hash it
  if (!content_md5.empty()) call.headers.emplace_back("Content-MD5", content_md5);
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
  std::string body = "<CompleteMultipartUpload>";
  for (const PartInfo& p : parts) {
    body += "<Part><PartNumber>" + std::to_string(p.number) + "</PartNumber><ETag>\"" +
            XmlEscape(p.etag) + "\"</ETag></Part>";
  }
  body += "</CompleteMultipartUpload>";
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
