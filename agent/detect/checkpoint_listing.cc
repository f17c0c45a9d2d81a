// ListCheckpointDir: the regular files and symlinks below checkpoint_dir,
// with the stat fields the preset rules judge them by.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "agent/detect/checkpoint_relpath.h"
#include "agent/detect/presets.h"

namespace sg {
namespace {

using FileClock = std::chrono::system_clock;
using preset_detail::JoinRel;
using preset_detail::NormalizeRelative;
using preset_detail::ParentOf;

FileClock::time_point ToTimePoint(const struct timespec& ts) {
  return FileClock::time_point(std::chrono::duration_cast<FileClock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

Status ListInto(const std::string& root, const std::string& rel, std::vector<ListedFile>& out) {
  const std::string dir_path = rel.empty() ? root : root + "/" + rel;
  DIR* dir = ::opendir(dir_path.c_str());
  if (dir == nullptr) {
    // A subdirectory removed while listing is simply gone.
    if (!rel.empty() && (errno == ENOENT || errno == ENOTDIR)) return Status::Ok();
    return Status::FromErrno(errno, "list " + dir_path);
  }
  std::vector<std::string> subdirs;
  Status status;
  while (true) {
    errno = 0;
    struct dirent* entry = ::readdir(dir);
    if (entry == nullptr) {
      if (errno != 0) status = Status::FromErrno(errno, "list " + dir_path);
      break;
    }
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string child = JoinRel(rel, name);
    if (IsAgentPrivatePath(child)) continue;
    struct stat st {};
    if (::lstat((root + "/" + child).c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      status = Status::FromErrno(errno, "stat " + root + "/" + child);
      break;
    }
    if (S_ISDIR(st.st_mode)) {
      subdirs.push_back(child);
      continue;
    }
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) continue;
    ListedFile f;
    f.relpath = child;
    f.is_symlink = S_ISLNK(st.st_mode);
    f.size = static_cast<uint64_t>(st.st_size);
    f.mode = st.st_mode & 07777;
    f.mtime = ToTimePoint(st.st_mtim);
    if (f.is_symlink) {
      std::string target(4096, '\0');
      ssize_t n = ::readlink((root + "/" + child).c_str(), target.data(), target.size());
      if (n > 0) {
        target.resize(static_cast<size_t>(n));
        std::string joined;
        if (!target.starts_with('/')) {
          joined = JoinRel(ParentOf(child), target);
        } else if (target.starts_with(root + "/")) {
          joined = target.substr(root.size() + 1);
        }
        if (!joined.empty()) f.symlink_target = NormalizeRelative(joined).value_or("");
      }
    }
    out.push_back(std::move(f));
  }
  ::closedir(dir);
  SG_RETURN_IF_ERROR(status);
  for (const std::string& sub : subdirs) SG_RETURN_IF_ERROR(ListInto(root, sub, out));
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<ListedFile>> ListCheckpointDir(const std::string& dir) {
  std::vector<ListedFile> out;
  std::string root = dir;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  SG_RETURN_IF_ERROR(ListInto(root, "", out));
  std::sort(out.begin(), out.end(),
            [](const ListedFile& a, const ListedFile& b) { return a.relpath < b.relpath; });
  return out;
}

}  // namespace sg
