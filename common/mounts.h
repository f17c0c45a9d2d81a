// Mount points as the kernel reports them (/proc/self/mountinfo, statx). A
// rename carries a mount along with the directory it is below, and no hard
// link or rename joins two mounts: code that swaps or links directories
// (agent/repo/restore_placement.h) asks here first.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace sg {

struct MountPoint {
  std::string path;  // named below the directory asked about: "<dir>/<rel>"
  std::string type;  // the file system type: "tmpfs", "nfs4", "ext4", ...
};

// Whether `dir` (an existing directory, `st` its lstat) is a mount point: on
// another device than its parent, or listed in mountinfo (a bind mount of
// the same file system keeps st_dev).
bool IsMountPoint(const std::string& dir, const struct stat& st);

// The mount points strictly below `dir`, from /proc/self/mountinfo, named
// under `dir` as given, sorted, each once. Empty when mountinfo cannot be
// read (then MountIdOf is the only guard).
std::vector<MountPoint> MountPointsBelow(const std::string& dir);

// An id of the mount that `path` is on, without following a final symlink:
// paths with different ids are on different mounts. statx's mount id (Linux
// 5.8 and later), else the device number.
StatusOr<uint64_t> MountIdOf(const std::string& path);

}  // namespace sg
