// Files and directories: descriptors that close themselves, whole-buffer I/O
// that retries EINTR and short writes, and atomic replacement of a file.
// Every descriptor is opened with O_CLOEXEC.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace sg {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// open(2) with O_CLOEXEC added and EINTR retried.
StatusOr<UniqueFd> OpenFile(const std::string& path, int flags, mode_t mode = 0644);

Status WriteAll(int fd, std::string_view data, std::string_view what);
// Makes the empty file `fd` `size` bytes long with its blocks allocated
// (fallocate), so that writes into it need no block reservation each and
// a disk too small fails here, before any byte is written. Where the
// filesystem cannot allocate ahead (EOPNOTSUPP), the file is only sized
// (ftruncate: a sparse file, filled as written).
Status AllocateFile(int fd, uint64_t size, std::string_view what);
// Reads exactly `length` bytes at `offset`, or fewer only at end of file.
StatusOr<std::string> PreadUpTo(int fd, uint64_t offset, uint64_t length, std::string_view what);
// The same into `out` (its memory reused): out->size() becomes the bytes read.
Status PreadInto(int fd, uint64_t offset, uint64_t length, std::string* out, std::string_view what);
StatusOr<std::string> ReadFileToString(const std::string& path);

// mkdir -p; existing directories are fine.
Status MakeDirs(const std::string& path, mode_t mode = 0755);
// fsync of a directory, so a rename or unlink inside it survives power loss.
Status FsyncDir(const std::string& dir);

// Writes `data` to a temporary file beside `path`, fsyncs it, renames it over
// `path` and fsyncs the directory: readers see the old or the new file, never
// a mix, and after return the new one survives a crash.
Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode = 0644);

// 16 hex characters from the kernel's random source, for unique temp names.
std::string RandomHex(size_t bytes = 8);

std::string DirName(std::string_view path);

// Whether files can be created in `dir`, or (when it does not exist yet) in
// its nearest existing ancestor, which is where it would be made. A read-only
// file system (EROFS, also for root) or missing permission gives an error
// that says which, naming `what` ("checkpoint_dir /x", "restore target /y").
Status CheckWritableDir(const std::string& dir, std::string_view what);

}  // namespace sg
