#include "common/mounts.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/files.h"

namespace sg {
namespace {

// /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string oct = s.substr(i + 1, 3);
      if (oct.find_first_not_of("01234567") == std::string::npos) {
        out += static_cast<char>(std::stoi(oct, nullptr, 8));
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// Every mount of this process's namespace: its mount point (absolute, from
// this process's root) and type. A line is "ID PARENT MAJ:MIN ROOT POINT
// OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER".
std::vector<MountPoint> MountTable() {
  std::vector<MountPoint> mounts;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, point, word;
    if (!(fields >> id >> parent >> devno >> root >> point)) continue;
    std::string type;
    while (fields >> word) {
      if (word == "-") {
        fields >> type;
        break;
      }
    }
    mounts.push_back({Unescape(point), Unescape(type)});
  }
  return mounts;
}

bool RealPath(const std::string& path, std::string* real) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return false;
  *real = buf;
  return true;
}

}  // namespace

bool IsMountPoint(const std::string& dir, const struct stat& st) {
  struct stat parent {};
  if (::stat(DirName(dir).c_str(), &parent) == 0 && parent.st_dev != st.st_dev) return true;
  std::string real;
  if (!RealPath(dir, &real)) return false;
  const std::vector<MountPoint> mounts = MountTable();
  return std::any_of(mounts.begin(), mounts.end(),
                     [&](const MountPoint& m) { return m.path == real; });
}

std::vector<MountPoint> MountPointsBelow(const std::string& dir) {
  std::string real;
  if (!RealPath(dir, &real)) return {};
  const std::string prefix = real == "/" ? real : real + "/";
  std::string named = dir;
  while (named.size() > 1 && named.back() == '/') named.pop_back();
  std::vector<MountPoint> below;
  for (MountPoint& m : MountTable()) {
    if (m.path.size() <= prefix.size() || !m.path.starts_with(prefix)) continue;
    m.path = (named == "/" ? "" : named) + "/" + m.path.substr(prefix.size());
    below.push_back(std::move(m));
  }
  // Mounts stacked on one point are listed once, with the type on top.
  std::stable_sort(below.begin(), below.end(),
                   [](const MountPoint& a, const MountPoint& b) { return a.path < b.path; });
  std::vector<MountPoint> once;
  for (MountPoint& m : below) {
    if (!once.empty() && once.back().path == m.path) {
      once.back() = std::move(m);
    } else {
      once.push_back(std::move(m));
    }
  }
  return once;
}

StatusOr<uint64_t> MountIdOf(const std::string& path) {
  struct statx stx {};
  if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) != 0) {
    return Status::FromErrno(errno, "stat " + path);
  }
  if (stx.stx_mask & STATX_MNT_ID) return static_cast<uint64_t>(stx.stx_mnt_id);
  return static_cast<uint64_t>(makedev(stx.stx_dev_major, stx.stx_dev_minor));
}

}  // namespace sg
