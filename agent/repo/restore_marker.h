// What a restore put into a directory (docs/design.md §7, step 4): the marker
// file kRestoreMarkerName records each restored file's inode, size and
// mtime, so that a file the trainer rewrote or renamed over since is no
// longer restore's. Looked up once per entry of the directory, by path in
// constant time: a restore over an earlier one of 100k files stays linear.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace sg {

// A file's mtime in nanoseconds, as the marker records it.
inline int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// `dir`/`rel`, or `dir` itself when `rel` is empty (the target's root).
inline std::string JoinRelPath(const std::string& dir, const std::string& rel) {
  return rel.empty() ? dir : dir + "/" + rel;
}

inline constexpr char kRestoreMarkerName[] = ".spotguard-restored.json";

struct RestoreMarker {
  struct File {
    uint64_t inode = 0;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
  };
  std::string id;  // the id of the restore that wrote it (its temporary dir's suffix)
  uint64_t seq = 0;
  // By path relative to the directory. A path listed twice counts as first listed.
  std::unordered_map<std::string, File> files;

  // Whether `relpath`, as `st` describes it now, is still the file restore put there.
  bool Owns(const std::string& relpath, const struct stat& st) const;
  // The record of `relpath`; nullptr when the marker does not list it.
  const File* Find(const std::string& relpath) const;
};

// The marker in `dir`; nullopt when there is none (or it is unreadable:
// then nothing in `dir` counts as restore's).
std::optional<RestoreMarker> ReadRestoreMarker(const std::string& dir);
// Writes the marker of restore `id` into `dir`, recording `paths` (relative
// to dir) as they are on disk now.
Status WriteRestoreMarker(const std::string& dir, const std::string& id, uint64_t seq,
                          const std::vector<std::string>& paths);

}  // namespace sg
