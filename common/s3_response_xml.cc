// S3 response parsers: S3's XML answers (listings, multipart results,
// DeleteObjects results, <Error> documents) read with pugixml; a body that is
// not XML or lacks the result element is Corruption.
#include "common/s3_response_xml.h"

#include <pugixml.hpp>

#include "common/s3_client.h"

namespace sg {
namespace s3_detail {

std::string Unquote(std::string s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

}  // namespace s3_detail

using s3_detail::Unquote;

namespace {

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

}  // namespace sg
