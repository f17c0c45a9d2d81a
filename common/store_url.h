// Store URLs: s3://BUCKET[/PREFIX] and file:///ABSOLUTE/PATH.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/file_store.h"
#include "common/object_store.h"
#include "common/status.h"

namespace sg {

struct StoreUrl {
  enum class Scheme { kFile, kS3 };
  Scheme scheme = Scheme::kFile;
  std::string bucket;  // s3 only
  std::string prefix;  // s3 only: key prefix without leading or trailing '/', may be empty
  std::string path;    // file only: absolute directory, no trailing '/'

  std::string ToString() const;
};

// Names the problem on failure: an unsupported scheme, a bucket name S3 would
// refuse, a relative or empty path.
StatusOr<StoreUrl> ParseStoreUrl(std::string_view url);

struct S3StoreOptions;

// Opens the store a URL names. file:// stores are created on first use
// (FileRoot::kCreate), or must exist (kMustExist: NotFound otherwise);
// s3:// stores take region, endpoint and credentials from `s3`.
StatusOr<std::unique_ptr<ObjectStore>> OpenObjectStore(const StoreUrl& url,
                                                       const S3StoreOptions& s3,
                                                       FileRoot file_root = FileRoot::kCreate);

}  // namespace sg
