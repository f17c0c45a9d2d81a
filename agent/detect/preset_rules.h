// The preset rules (docs/checkpoints.md): each turns a listing of
// checkpoint_dir into the complete checkpoints it holds. Internal to
// agent/detect/presets.cc, which picks the rule for the configured preset.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/detect/checkpoint.h"
#include "agent/detect/checkpoint_relpath.h"
#include "agent/detect/presets.h"

namespace sg::preset_detail {

// The file torch.distributed.checkpoint writes last, once every shard is done.
inline constexpr std::string_view kDcpMetadata = ".metadata";

// A whole string of decimal digits as a number; nullopt otherwise.
std::optional<int64_t> ParseDigits(std::string_view digits);

// Everything the rules need about the listing.
class Listing {
 public:
  Listing(const std::vector<ListedFile>& files, const std::set<std::string>& unsettled)
      : files_(files), unsettled_(unsettled) {
    for (const ListedFile& f : files) by_path_[f.relpath] = &f;
  }
  const std::vector<ListedFile>& files() const { return files_; }
  const ListedFile* Find(const std::string& relpath) const {
    auto it = by_path_.find(relpath);
    return it == by_path_.end() ? nullptr : it->second;
  }
  // A regular file that is not being written and has been left alone for the
  // settle time.
  bool IsSettledFile(const std::string& relpath) const {
    const ListedFile* f = Find(relpath);
    return f != nullptr && !f->is_symlink && unsettled_.count(relpath) == 0;
  }
  bool IsUnsettled(const std::string& relpath) const { return unsettled_.count(relpath) != 0; }
  // Regular, non-temporary files below `dir` ("" for all).
  std::vector<const ListedFile*> FilesUnder(std::string_view dir) const {
    std::vector<const ListedFile*> out;
    for (const ListedFile& f : files_) {
      if (!f.is_symlink && IsUnder(f.relpath, dir) && !HasTempComponent(f.relpath)) {
        out.push_back(&f);
      }
    }
    return out;
  }
  static bool HasTempComponent(std::string_view relpath) {
    size_t start = 0;
    while (true) {
      size_t slash = relpath.find('/', start);
      if (slash == std::string_view::npos) return IsTempName(relpath.substr(start));
      std::string_view dir = relpath.substr(start, slash - start);
      if (dir.starts_with('.') || IsTempName(dir)) return true;
      start = slash + 1;
    }
  }

 private:
  const std::vector<ListedFile>& files_;
  const std::set<std::string>& unsettled_;
  std::map<std::string, const ListedFile*, std::less<>> by_path_;
};

void DetectCaffe(const Listing& listing, std::vector<Checkpoint>& out);
// pytorch, lightning and generic: files matching `patterns`.
void DetectFiles(const Listing& listing, const std::vector<std::string>& patterns,
                 std::vector<Checkpoint>& out);
void DetectHuggingface(const Listing& listing, std::vector<Checkpoint>& out);
// dcp: directories holding `.metadata`. With `node_rank` (a member of a
// multi-node group, docs/multi-node.md) other than 0, also directories
// holding this node's marker (DcpNodeMarkers): the nodes of the other ranks
// never get `.metadata` when the nodes share no filesystem.
void DetectDcp(const Listing& listing, std::optional<int> node_rank, std::vector<Checkpoint>& out);
// The names that mark a DCP step directory complete on node `node_rank`:
// "node_<R>.json" and "node_<R>.done".
std::vector<std::string> DcpNodeMarkers(int node_rank);
// Reads the `checkpoint` index files below `checkpoint_dir`.
void DetectTensorflow(const Listing& listing, const std::string& checkpoint_dir,
                      std::vector<Checkpoint>& out);

}  // namespace sg::preset_detail
