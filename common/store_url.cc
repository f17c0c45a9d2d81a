#include "common/store_url.h"

#include <cctype>

#include "common/file_store.h"
#include "common/s3_store.h"
#include "common/strings.h"

namespace sg {
namespace {

// S3's rules for bucket names (general purpose buckets).
Status CheckBucketName(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) {
    return Status::InvalidArgument("bucket name \"" + b + "\" must be 3 to 63 characters long");
  }
  for (char c : b) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.')) {
      return Status::InvalidArgument("bucket name \"" + b +
                                     "\" may hold only lower-case letters, digits, '.' and '-'");
    }
  }
  auto alnum = [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c));
  };
  if (!alnum(b.front()) || !alnum(b.back())) {
    return Status::InvalidArgument("bucket name \"" + b +
                                   "\" must begin and end with a letter or digit");
  }
  if (b.find("..") != std::string::npos) {
    return Status::InvalidArgument("bucket name \"" + b + "\" must not contain \"..\"");
  }
  return Status::Ok();
}

}  // namespace

std::string StoreUrl::ToString() const {
  if (scheme == Scheme::kS3) return "s3://" + bucket + (prefix.empty() ? "" : "/" + prefix);
  return "file://" + path;
}

StatusOr<StoreUrl> ParseStoreUrl(std::string_view url) {
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return Status::InvalidArgument("\"" + std::string(url) +
                                   "\" is not a store URL (use s3://BUCKET/PREFIX or "
                                   "file:///ABSOLUTE/PATH)");
  }
  const std::string scheme = ToLower(url.substr(0, sep));
  std::string_view rest = url.substr(sep + 3);
  StoreUrl out;
  if (scheme == "s3") {
    out.scheme = StoreUrl::Scheme::kS3;
    const size_t slash = rest.find('/');
    out.bucket = std::string(rest.substr(0, slash));
    SG_RETURN_IF_ERROR(CheckBucketName(out.bucket));
    std::string_view prefix = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
    while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
    for (const std::string& seg : Split(prefix, '/')) {
      if (!prefix.empty() && (seg.empty() || seg == "." || seg == "..")) {
        return Status::InvalidArgument("prefix \"" + std::string(prefix) +
                                       "\" has an empty, '.' or '..' segment");
      }
    }
    out.prefix = std::string(prefix);
    return out;
  }
  if (scheme == "file") {
    out.scheme = StoreUrl::Scheme::kFile;
    if (rest.empty() || rest.front() != '/') {
      return Status::InvalidArgument("file store \"" + std::string(url) +
                                     "\" needs an absolute path, as in file:///var/lib/spotguard");
    }
    std::string path(rest);
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    out.path = std::move(path);
    return out;
  }
  return Status::InvalidArgument("unsupported scheme \"" + scheme +
                                 "\" (use s3://BUCKET/PREFIX or file:///ABSOLUTE/PATH)");
}

StatusOr<std::unique_ptr<ObjectStore>> OpenObjectStore(const StoreUrl& url,
                                                       const S3StoreOptions& s3,
                                                       FileRoot file_root) {
  if (url.scheme == StoreUrl::Scheme::kFile) {
    SG_ASSIGN_OR_RETURN(std::unique_ptr<FileStore> store, FileStore::Open(url.path, file_root));
    return std::unique_ptr<ObjectStore>(std::move(store));
  }
  SG_ASSIGN_OR_RETURN(std::unique_ptr<S3Store> store, S3Store::Open(url, s3));
  return std::unique_ptr<ObjectStore>(std::move(store));
}

}  // namespace sg
