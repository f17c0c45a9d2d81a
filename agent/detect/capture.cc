#include "agent/detect/capture.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <thread>

#include "common/files.h"
#include "common/log.h"

namespace sg {

FileIdentity IdentityOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

std::string DescribeChange(const FileIdentity& was, const FileIdentity& now) {
  std::string d;
  if (was.ino != now.ino || was.dev != now.dev) d += "inode changed; ";
  if (was.size != now.size) {
    d += "size " + std::to_string(was.size) + " -> " + std::to_string(now.size) + "; ";
  }
  if (was.mtime_ns != now.mtime_ns) {
    d += "mtime +" + std::to_string(now.mtime_ns - was.mtime_ns) + " ns; ";
  }
  if (d.size() >= 2) d.resize(d.size() - 2);
  return d;
}

Status FileChanged(const std::string& relpath, std::string_view what) {
  return Status::Unavailable(relpath + " " + std::string(what) +
                             "; take the next complete checkpoint")
      .WithReason("FileChanged");
}

namespace {

// File timestamps come from the kernel's coarse clock, which advances once a
// jiffy (10 ms at HZ=100, the coarsest common setting). Once the wall clock is
// this far past a file's mtime, any later write gives it a different mtime.
constexpr std::chrono::milliseconds kTimestampGranularity(25);
constexpr size_t kCopyBuffer = 1 << 20;

int64_t WallNowNs() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Sleeps until any write after now would show in an mtime later than `mtime_ns`.
void WaitPastTimestampTick(int64_t mtime_ns) {
  const int64_t until = mtime_ns + std::chrono::nanoseconds(kTimestampGranularity).count();
  const int64_t now = WallNowNs();
  if (now < until) std::this_thread::sleep_for(std::chrono::nanoseconds(until - now));
}

int64_t ToNs(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

bool IsSafeRelpath(const std::string& rel) {
  if (rel.empty() || rel.front() == '/') return false;
  size_t start = 0;
  while (true) {
    const size_t slash = rel.find('/', start);
    const std::string_view part = std::string_view(rel).substr(
        start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

// Copies `src` to `dst` (a new file), failing with kUnavailable when the
// source changes while it is read. Returns the stat of the source.
StatusOr<struct stat> CopyUnchanged(const std::string& relpath, const std::string& src,
                                    const std::string& dst) {
  auto in = OpenFile(src, O_RDONLY);
  if (!in.ok()) {
    if (in.status().Is(StatusCode::kNotFound)) return FileChanged(relpath, "vanished");
    return in.status();
  }
  struct stat before {};
  if (::fstat(in->get(), &before) != 0) return Status::FromErrno(errno, "stat " + src);
  if (!S_ISREG(before.st_mode)) return Status::InvalidArgument(src + " is not a regular file");
  WaitPastTimestampTick(IdentityOf(before).mtime_ns);
  if (::fstat(in->get(), &before) != 0) return Status::FromErrno(errno, "stat " + src);

  SG_ASSIGN_OR_RETURN(UniqueFd out, OpenFile(dst, O_WRONLY | O_CREAT | O_EXCL, 0600));
  std::string buf(kCopyBuffer, '\0');
  uint64_t copied = 0;
  while (true) {
    const ssize_t n = ::read(in->get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "read " + src);
    }
    if (n == 0) break;
    SG_RETURN_IF_ERROR(WriteAll(out.get(), std::string_view(buf.data(), n), dst));
    copied += static_cast<uint64_t>(n);
  }
  struct stat after {};
  if (::fstat(in->get(), &after) != 0) return Status::FromErrno(errno, "stat " + src);
  if (!(IdentityOf(before) == IdentityOf(after)) ||
      copied != static_cast<uint64_t>(before.st_size)) {
    return FileChanged(relpath, "changed while it was copied (" +
                                    DescribeChange(IdentityOf(before), IdentityOf(after)) + ")");
  }
  return before;
}

}  // namespace

CapturedCheckpoint::CapturedCheckpoint(CapturedCheckpoint&& other) noexcept
    : checkpoint_(std::move(other.checkpoint_)),
      files_(std::move(other.files_)),
      staging_dir_(std::exchange(other.staging_dir_, std::string())) {}

CapturedCheckpoint& CapturedCheckpoint::operator=(CapturedCheckpoint&& other) noexcept {
  if (this != &other) {
    RemoveStaging();
    checkpoint_ = std::move(other.checkpoint_);
    files_ = std::move(other.files_);
    staging_dir_ = std::exchange(other.staging_dir_, std::string());
  }
  return *this;
}

CapturedCheckpoint::~CapturedCheckpoint() { RemoveStaging(); }

void CapturedCheckpoint::RemoveStaging() {
  if (staging_dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(staging_dir_, ec);
  if (ec) LogWarn("could not remove staging dir {}: {}", staging_dir_, ec.message());
  staging_dir_.clear();
}

uint64_t CapturedCheckpoint::total_bytes() const {
  uint64_t total = 0;
  for (const CapturedFile& f : files_) total += f.size;
  return total;
}

StatusOr<CapturedCheckpoint> CapturedCheckpoint::Capture(const std::string& checkpoint_dir,
                                                         const Checkpoint& checkpoint,
                                                         const std::string& staging_root) {
  if (checkpoint.relpaths.empty()) {
    return Status::InvalidArgument("checkpoint " + checkpoint.id + " names no files");
  }
  for (const std::string& rel : checkpoint.relpaths) {
    if (!IsSafeRelpath(rel)) {
      return Status::InvalidArgument("checkpoint " + checkpoint.id + " names the unsafe path '" +
                                     rel + "'");
    }
  }
  SG_RETURN_IF_ERROR(MakeDirs(staging_root, 0700));
  std::string templ = staging_root + "/capture-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    return Status::FromErrno(errno, "create a staging dir in " + staging_root);
  }
  CapturedCheckpoint captured;
  captured.staging_dir_ = templ;  // removed by the destructor on any failure below
  captured.checkpoint_ = checkpoint;

  const int64_t detected_ns = ToNs(checkpoint.newest_mtime);
  int64_t newest_linked_ns = 0;
  bool any_linked = false;
  std::vector<std::string> relpaths = checkpoint.relpaths;
  std::sort(relpaths.begin(), relpaths.end());
  for (const std::string& rel : relpaths) {
    const std::string src = checkpoint_dir + "/" + rel;
    const std::string dst = captured.staging_dir_ + "/" + rel;
    SG_RETURN_IF_ERROR(MakeDirs(DirName(dst), 0700));
    CapturedFile file;
    file.relpath = rel;
    file.staged_path = dst;
    struct stat st {};
    if (::linkat(AT_FDCWD, src.c_str(), AT_FDCWD, dst.c_str(), 0) == 0) {
      if (::lstat(dst.c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + dst);
      if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(src + " is not a regular file");
      file.linked = true;
      any_linked = true;
      newest_linked_ns = std::max(newest_linked_ns, IdentityOf(st).mtime_ns);
    } else if (errno == ENOENT) {
      return FileChanged(rel, "vanished");
    } else if (errno == EXDEV || errno == EPERM || errno == EMLINK || errno == EOPNOTSUPP) {
      // Another filesystem, protected_hardlinks, too many links, or no links
      // at all: a private copy, checked against the source before and after.
      SG_ASSIGN_OR_RETURN(struct stat src_st, CopyUnchanged(rel, src, dst));
      if (::lstat(dst.c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + dst);
      st.st_mode = src_st.st_mode;
      if (IdentityOf(src_st).mtime_ns > detected_ns) {
        return FileChanged(rel, "was modified after the checkpoint was detected");
      }
    } else {
      return Status::FromErrno(errno, "link " + src + " into " + captured.staging_dir_);
    }
    file.mode = st.st_mode & 07777;
    file.size = static_cast<uint64_t>(st.st_size);
    file.identity = IdentityOf(st);
    if (file.linked && file.identity.mtime_ns > detected_ns) {
      return FileChanged(rel, "was modified after the checkpoint was detected");
    }
    captured.files_.push_back(std::move(file));
  }
  if (any_linked) {
    // A write in the same timestamp tick as the identity just taken would
    // not show in the mtime; wait out the tick and look again.
    WaitPastTimestampTick(newest_linked_ns);
    SG_RETURN_IF_ERROR(captured.Verify());
  }
  LogDebug("captured {} ({} files, {} bytes) in {}", checkpoint.id, captured.files_.size(),
           captured.total_bytes(), captured.staging_dir_);
  return captured;
}

StatusOr<CapturedCheckpoint> CapturedCheckpoint::InPlace(
    const std::map<std::string, std::string>& files, Checkpoint checkpoint) {
  if (files.empty()) return Status::InvalidArgument("a snapshot needs at least one file");
  CapturedCheckpoint captured;
  checkpoint.relpaths.clear();
  for (const auto& [rel, path] : files) {  // sorted by relpath
    CapturedFile file;
    file.relpath = rel;
    file.staged_path = path;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + path);
    if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + " is not a regular file");
    file.mode = st.st_mode & 07777;
    file.size = static_cast<uint64_t>(st.st_size);
    file.identity = IdentityOf(st);
    checkpoint.relpaths.push_back(rel);
    captured.files_.push_back(std::move(file));
  }
  captured.checkpoint_ = std::move(checkpoint);
  return captured;
}

StatusOr<CapturedCheckpoint> CapturedCheckpoint::InPlace(const std::string& dir,
                                                         Checkpoint checkpoint) {
  std::map<std::string, std::string> files;
  for (const std::string& rel : checkpoint.relpaths) files[rel] = dir + "/" + rel;
  return InPlace(files, std::move(checkpoint));
}

Status CapturedCheckpoint::Verify() const {
  for (const CapturedFile& f : files_) {
    struct stat st {};
    // stat, not lstat: a file read in place may be named by a symlink.
    if (::stat(f.staged_path.c_str(), &st) != 0) {
      return FileChanged(f.relpath,
                         staging_dir_.empty() ? "vanished" : "vanished from the staging dir");
    }
    const FileIdentity now = IdentityOf(st);
    if (!(now == f.identity)) {
      return FileChanged(f.relpath, "was rewritten in place while captured (" +
                                        DescribeChange(f.identity, now) + ")");
    }
  }
  return Status::Ok();
}

StatusOr<std::string> PrepareStagingRoot(const std::string& checkpoint_dir,
                                         const std::string& job) {
  std::string dir = checkpoint_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat dir_st {};
  if (::stat(dir.c_str(), &dir_st) != 0) return Status::FromErrno(errno, "stat " + dir);
  std::string safe_job = job;
  std::replace(safe_job.begin(), safe_job.end(), '/', '_');
  const std::string parent = DirName(dir);
  const std::string beside =
      (parent == "/" ? std::string() : parent) + "/.spotguard-staging-" + safe_job;
  struct stat parent_st {};
  if (::stat(parent.c_str(), &parent_st) == 0 && parent_st.st_dev == dir_st.st_dev &&
      MakeDirs(beside, 0700).ok()) {
    struct stat st {};
    if (::stat(beside.c_str(), &st) == 0 && st.st_dev == dir_st.st_dev) return beside;
  }
  const std::string inside = dir + "/.spotguard-staging";
  SG_RETURN_IF_ERROR(MakeDirs(inside, 0700));
  return inside;
}

Status RemoveStaleCaptures(const std::string& staging_root) {
  std::error_code ec;
  std::filesystem::directory_iterator it(staging_root, ec);
  if (ec == std::errc::no_such_file_or_directory) return Status::Ok();
  if (ec) return Status::IOError("list " + staging_root + ": " + ec.message());
  for (const auto& entry : it) {
    if (!entry.path().filename().string().starts_with("capture-")) continue;
    std::filesystem::remove_all(entry.path(), ec);
    if (ec) return Status::IOError("remove " + entry.path().string() + ": " + ec.message());
    LogInfo("removed stale capture {}", entry.path().string());
  }
  return Status::Ok();
}

}  // namespace sg
