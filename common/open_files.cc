#include "common/open_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "common/files.h"

namespace sg {
namespace {

bool IsNumber(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// The open flags of a descriptor from /proc/<pid>/fdinfo/<fd>, or -1.
int OpenFlags(const std::string& fdinfo) {
  auto text = ReadFileToString(fdinfo);
  if (!text.ok()) return -1;
  const size_t at = text->find("flags:");
  if (at == std::string::npos) return -1;
  return static_cast<int>(std::strtol(text->c_str() + at + 6, nullptr, 8));
}

}  // namespace

StatusOr<std::set<std::string>> FilesOpenForWriting(const std::string& dir) {
  std::string prefix = dir;
  while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
  prefix += '/';
  std::set<std::string> out;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return Status::FromErrno(errno, "list /proc");
  while (struct dirent* p = ::readdir(proc)) {
    if (!IsNumber(p->d_name)) continue;
    const std::string fd_dir = std::string("/proc/") + p->d_name + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    if (fds == nullptr) continue;  // not ours to see, or gone
    while (struct dirent* f = ::readdir(fds)) {
      if (!IsNumber(f->d_name)) continue;
      char target[4096];
      const ssize_t n = ::readlink((fd_dir + "/" + f->d_name).c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      const std::string_view path(target, static_cast<size_t>(n));
      if (!path.starts_with(prefix)) continue;
      const int flags = OpenFlags(std::string("/proc/") + p->d_name + "/fdinfo/" + f->d_name);
      if (flags < 0) continue;
      const int mode = flags & O_ACCMODE;
      if (mode == O_WRONLY || mode == O_RDWR) out.emplace(path);
    }
    ::closedir(fds);
  }
  ::closedir(proc);
  return out;
}

}  // namespace sg
