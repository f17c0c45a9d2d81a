#include "agent/host_lock.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

namespace sg {
namespace {

std::string Trimmed(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

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

// Whether `dir` (an existing directory) is a mount point: on another device
// than its parent, or listed in mountinfo (a bind mount of the same file
// system keeps st_dev).
bool IsMountPoint(const std::string& dir, const struct stat& st) {
  struct stat parent {};
  if (::stat(DirName(dir).c_str(), &parent) == 0 && parent.st_dev != st.st_dev) return true;
  char real[PATH_MAX];
  if (::realpath(dir.c_str(), real) == nullptr) return false;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent_id, devno, root, mount_point;
    if (fields >> id >> parent_id >> devno >> root >> mount_point &&
        Unescape(mount_point) == real) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string BesideCheckpointDir(const std::string& checkpoint_dir, const std::string& suffix) {
  const std::string dir = Trimmed(checkpoint_dir);
  const std::string parent = DirName(dir);
  return (parent == "/" ? std::string() : parent) + "/.spotguard-" + BaseName(dir) + suffix;
}

std::string HostLockPath(const std::string& checkpoint_dir) {
  return BesideCheckpointDir(checkpoint_dir, ".lock");
}

StatusOr<HostLock> HostLock::Acquire(const std::string& checkpoint_dir) {
  const std::string path = HostLockPath(checkpoint_dir);
  SG_RETURN_IF_ERROR(MakeDirs(DirName(path)));
  SG_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path, O_RDWR | O_CREAT, 0644));
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) return Status::FromErrno(errno, "lock " + path);
    std::string holder = "pid unknown";
    if (auto text = PreadUpTo(fd.get(), 0, 64, path); text.ok()) {
      std::string pid = *text;
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
      if (!pid.empty() && pid.find_first_not_of("0123456789") == std::string::npos) {
        holder = "pid " + pid;
      }
    }
    return Status::PreconditionFailed("another spotguard agent (" + holder +
                                      ") is already running for checkpoint_dir " +
                                      Trimmed(checkpoint_dir) + " on this host (it holds " + path +
                                      "); not starting a second one")
        .WithReason("Locked");
  }
  // Ours now: say who we are for the next agent's message.
  if (::ftruncate(fd.get(), 0) != 0) return Status::FromErrno(errno, "truncate " + path);
  const std::string pid = std::to_string(::getpid()) + "\n";
  std::string_view rest = pid;
  off_t at = 0;
  while (!rest.empty()) {
    const ssize_t n = ::pwrite(fd.get(), rest.data(), rest.size(), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "write " + path);
    rest.remove_prefix(static_cast<size_t>(n));
    at += n;
  }
  return HostLock(std::move(fd), path);
}

Status ValidateCheckpointDir(const std::string& checkpoint_dir) {
  const std::string dir = Trimmed(checkpoint_dir);
  const std::string what = "checkpoint_dir " + dir;
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();  // made by the restore; CheckWritableDir judges that
    if (errno == ENOTDIR) {
      return Status::InvalidArgument(what + ": a component of the path is not a directory");
    }
    return Status::FromErrno(errno, what);
  }
  if (S_ISLNK(st.st_mode)) {
    // Restore replaces the directory with a rename: through a link it would
    // replace the link and leave the real directory behind.
    char real[PATH_MAX];
    if (::realpath(dir.c_str(), real) != nullptr) {
      return Status::InvalidArgument(what + " is a symlink to " + real +
                                     "; set checkpoint_dir to " + real);
    }
    return Status::InvalidArgument(what +
                                   " is a symlink to a path that does not exist; set "
                                   "checkpoint_dir to a real directory");
  }
  if (!S_ISDIR(st.st_mode)) {
    const std::string kind = S_ISREG(st.st_mode) ? "a regular file" : "not a directory";
    return Status::InvalidArgument(what + " is " + kind +
                                   ", not a directory; set checkpoint_dir to a directory");
  }
  if (IsMountPoint(dir, st)) {
    return Status::InvalidArgument(
        what + " is a mount point; set checkpoint_dir to a directory below it (e.g. " + dir +
        "/ckpt): restore swaps the directory into place atomically with a rename, which a "
        "mount point cannot take");
  }
  return Status::Ok();
}

}  // namespace sg
