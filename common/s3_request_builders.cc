// S3 request builders: the address of a request (endpoint, path or
// virtual-hosted style, the encoded path and query) and the XML bodies.
#include "common/s3_request_builders.h"

#include <string_view>

#include "common/sigv4.h"

namespace sg {
namespace s3_detail {
namespace {

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

}  // namespace

std::string DeleteObjectsXml(const std::vector<std::string>& keys) {
  std::string body = "<Delete><Quiet>true</Quiet>";
  for (const std::string& k : keys) body += "<Object><Key>" + XmlEscape(k) + "</Key></Object>";
  body += "</Delete>";
  return body;
}

std::string CreateBucketConfigurationXml(const std::string& region) {
  return "<CreateBucketConfiguration><LocationConstraint>" + XmlEscape(region) +
         "</LocationConstraint></CreateBucketConfiguration>";
}

std::string CompleteMultipartUploadXml(const std::vector<PartInfo>& parts) {
  std::string body = "<CompleteMultipartUpload>";
  for (const PartInfo& p : parts) {
    body += "<Part><PartNumber>" + std::to_string(p.number) + "</PartNumber><ETag>\"" +
            XmlEscape(p.etag) + "\"</ETag></Part>";
  }
  body += "</CompleteMultipartUpload>";
  return body;
}

}  // namespace s3_detail

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

}  // namespace sg
