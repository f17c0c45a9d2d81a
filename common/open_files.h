// Which files below a directory some process holds open for writing, read
// from /proc. Used where inotify cannot tell (files that were already open
// before a watch existed). Processes whose /proc entries cannot be read
// (other users' without privileges, ones that exit meanwhile) are skipped.
#pragma once

#include <set>
#include <string>

#include "common/status.h"

namespace sg {

// Absolute paths of regular files under `dir` (an absolute path) that are
// open with O_WRONLY or O_RDWR by any process we may inspect, ourselves
// included. Fails only when /proc itself cannot be listed.
StatusOr<std::set<std::string>> FilesOpenForWriting(const std::string& dir);

}  // namespace sg
