#include "common/files.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace sg {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

int UniqueFd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);  // close(2) must not be retried on EINTR on Linux.
  fd_ = fd;
}

StatusOr<UniqueFd> OpenFile(const std::string& path, int flags, mode_t mode) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return Status::FromErrno(errno, "open " + path);
  return UniqueFd(fd);
}

Status WriteAll(int fd, std::string_view data, std::string_view what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "write " + std::string(what));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status AllocateFile(int fd, uint64_t size, std::string_view what) {
  if (size == 0) return Status::Ok();
  int rc;
  do {
    rc = ::fallocate(fd, 0, 0, static_cast<off_t>(size));
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) return Status::Ok();
  if (errno != EOPNOTSUPP && errno != ENOSYS) {
    return Status::FromErrno(errno, "allocate " + std::to_string(size) + " bytes for " +
                                        std::string(what));
  }
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    return Status::FromErrno(errno, "size " + std::string(what));
  }
  return Status::Ok();
}

Status PreadInto(int fd, uint64_t offset, uint64_t length, std::string* out, std::string_view what) {
  out->resize(length);
  uint64_t done = 0;
  while (done < length) {
    ssize_t n = ::pread(fd, out->data() + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "read " + std::string(what));
    }
    if (n == 0) break;
    done += static_cast<uint64_t>(n);
  }
  out->resize(done);
  return Status::Ok();
}

StatusOr<std::string> PreadUpTo(int fd, uint64_t offset, uint64_t length, std::string_view what) {
  std::string out;
  SG_RETURN_IF_ERROR(PreadInto(fd, offset, length, &out, what));
  return out;
}

StatusOr<std::string> ReadFileToString(const std::string& path) {
  SG_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path, O_RDONLY));
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Status MakeDirs(const std::string& path, mode_t mode) {
  if (path.empty()) return Status::Ok();
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), mode) != 0 && errno != EEXIST) {
      return Status::FromErrno(errno, "mkdir " + partial);
    }
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + path);
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(path + " exists and is not a directory");
  return Status::Ok();
}

Status FsyncDir(const std::string& dir) {
  SG_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(dir, O_RDONLY | O_DIRECTORY));
  if (::fsync(fd.get()) != 0) return Status::FromErrno(errno, "fsync " + dir);
  return Status::Ok();
}

std::string DirName(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode) {
  const std::string dir = DirName(path);
  const std::string tmp = path + ".tmp-" + RandomHex();
  {
    SG_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(tmp, O_WRONLY | O_CREAT | O_EXCL, mode));
    Status st = WriteAll(fd.get(), data, tmp);
    if (st.ok() && ::fsync(fd.get()) != 0) st = Status::FromErrno(errno, "fsync " + tmp);
    if (!st.ok()) {
      ::unlink(tmp.c_str());
      return st;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status st = Status::FromErrno(errno, "rename " + tmp + " to " + path);
    ::unlink(tmp.c_str());
    return st;
  }
  return FsyncDir(dir);
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;  // getrandom cannot fail on Linux >= 3.17 once the pool is ready.
    }
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

Status CheckWritableDir(const std::string& dir, std::string_view what) {
  std::string probe = dir.empty() ? "." : dir;
  while (::access(probe.c_str(), F_OK) != 0 && probe != "/" && probe != ".") {
    probe = DirName(probe);
  }
  if (::access(probe.c_str(), W_OK) == 0) return Status::Ok();
  const int err = errno;
  const std::string where = probe == dir ? "" : " (in " + probe + ")";
  if (err == EROFS) {
    return Status::PermissionDenied(std::string(what) + " is on a read-only file system" + where +
                                    ": nothing can be written there");
  }
  if (err == EACCES || err == EPERM) {
    return Status::PermissionDenied(std::string(what) + " is not writable by this user" + where);
  }
  return Status::FromErrno(err, "check " + std::string(what));
}

}  // namespace sg
