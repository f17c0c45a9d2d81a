#include "agent/trainer/host_lock.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "agent/repo/restore_placement.h"
#include "common/mounts.h"

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
  return CheckNoMountBelow(dir, what);
}

}  // namespace sg
