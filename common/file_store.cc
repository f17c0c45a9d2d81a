// FileStore (common/file_store.h): an object store in a local directory, each
// write staged and renamed into place, conditions checked under a lock.
#include "common/file_store.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <ctime>
#include <filesystem>

#include "common/files.h"
#include "common/spare_buffer.h"
#include "common/staged_name.h"
#include "common/strings.h"

namespace sg {
namespace {

constexpr std::string_view kReservedPrefix = ".spotguard-";
constexpr size_t kMaxKeyBytes = 1024;  // S3's limit

std::string EtagOf(const struct stat& st) {
  char buf[80];
  std::snprintf(buf, sizeof buf, "%llx-%llx%09lx-%llx", static_cast<unsigned long long>(st.st_ino),
                static_cast<unsigned long long>(st.st_mtim.tv_sec),
                static_cast<unsigned long>(st.st_mtim.tv_nsec),
                static_cast<unsigned long long>(st.st_size));
  return buf;
}

ObjectInfo InfoOf(const std::string& key, const struct stat& st) {
  ObjectInfo info;
  info.key = key;
  info.size = static_cast<uint64_t>(st.st_size);
  info.etag = EtagOf(st);
  info.modified = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  return info;
}

// Gives each staged object a modification time no other object written by
// this process shares, so inode reuse cannot repeat an etag.
struct timespec UniqueMtime() {
  static std::atomic<int64_t> last_ns{0};
  struct timespec now {};
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t ns = static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
  int64_t prev = last_ns.load();
  while (true) {
    const int64_t next = std::max(ns, prev + 1);
    if (last_ns.compare_exchange_weak(prev, next)) {
      ns = next;
      break;
    }
  }
  return {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

// An exclusive flock(2) held for the lifetime of the object. Each holder opens
// the file itself, so threads of one process exclude each other too.
class StoreLock {
 public:
  static StatusOr<StoreLock> Acquire(const std::string& path) {
    SG_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path, O_RDWR | O_CREAT, 0644));
    while (::flock(fd.get(), LOCK_EX) != 0) {
      if (errno != EINTR) return Status::FromErrno(errno, "lock " + path);
    }
    return StoreLock(std::move(fd));
  }

 private:
  explicit StoreLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;  // closing it releases the lock
};

Status StatPath(const std::string& path, struct stat* st) {
  if (::stat(path.c_str(), st) != 0) return Status::FromErrno(errno, "stat " + path);
  if (!S_ISREG(st->st_mode)) return Status::NotFound(path + " is not an object");
  return Status::Ok();
}

// Gives a staged file its unique mtime, makes it durable and returns its etag.
StatusOr<std::string> FinishStaged(int fd, const std::string& staged) {
  const struct timespec times[2] = {UniqueMtime(), UniqueMtime()};
  if (::futimens(fd, times) != 0) return Status::FromErrno(errno, "utime " + staged);
  if (::fsync(fd) != 0) return Status::FromErrno(errno, "fsync " + staged);
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) return Status::FromErrno(errno, "stat " + staged);
  return EtagOf(sb);
}

}  // namespace

FileStore::FileStore(std::string root)
    : root_(std::move(root)),
      tmp_dir_(root_ + "/.spotguard-tmp"),
      lock_path_(root_ + "/.spotguard-lock") {}

StatusOr<std::unique_ptr<FileStore>> FileStore::Open(const std::string& root, FileRoot mode) {
  if (root.empty() || root.front() != '/') {
    return Status::InvalidArgument("file store root \"" + root + "\" must be an absolute path");
  }
  std::string clean = root;
  while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
  auto store = std::unique_ptr<FileStore>(new FileStore(clean));
  if (mode == FileRoot::kMustExist) {
    struct stat st {};
    if (::stat(clean.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Status::NotFound("the store file://" + clean + " does not exist: " + clean +
                              " is not a directory (is `store` mistyped?)");
    }
    return store;
  }
  SG_RETURN_IF_ERROR(MakeDirs(store->tmp_dir_).WithContext("open file store " + clean));
  return store;
}

StatusOr<std::string> FileStore::PathFor(const std::string& key) const {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("key \"" + key + "\" " + std::string(why));
  };
  if (key.empty()) return bad("is empty");
  if (key.size() > kMaxKeyBytes) return bad("is longer than 1024 bytes");
  if (key.find('\0') != std::string::npos) return bad("contains a NUL byte");
  if (key.front() == '/' || key.back() == '/') return bad("begins or ends with '/'");
  const std::vector<std::string> segments = Split(key, '/');
  for (const std::string& seg : segments) {
    if (seg.empty() || seg == "." || seg == "..") return bad("has an empty, '.' or '..' segment");
    if (seg.size() > NAME_MAX) return bad("has a segment longer than 255 bytes");
  }
  if (segments.front().starts_with(kReservedPrefix)) return bad("uses a name the store reserves");
  return root_ + "/" + key;
}

std::string FileStore::NewStagedPath(const std::string& key) const {
  return tmp_dir_ + "/" + StagedName(key);
}

Status FileStore::CommitStaged(const std::string& key, const std::string& staged,
                               const std::string& path, const PutCondition& condition) {
  SG_ASSIGN_OR_RETURN(StoreLock lock, StoreLock::Acquire(lock_path_));
  SG_RETURN_IF_ERROR(MakeDirs(DirName(path)));
  switch (condition.kind) {
    case PutCondition::Kind::kNone:
      if (::rename(staged.c_str(), path.c_str()) != 0) return Status::FromErrno(errno, "rename");
      break;
    case PutCondition::Kind::kCreateOnly:
      if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0) {
        if (errno == EEXIST) return Status::PreconditionFailed(key + " already exists");
        if (errno != EINVAL) return Status::FromErrno(errno, "rename");
        // The filesystem lacks RENAME_NOREPLACE; link(2) also refuses to replace.
        if (::link(staged.c_str(), path.c_str()) != 0) {
          if (errno == EEXIST) return Status::PreconditionFailed(key + " already exists");
          return Status::FromErrno(errno, "link");
        }
        ::unlink(staged.c_str());
      }
      break;
    case PutCondition::Kind::kIfMatch: {
      struct stat current {};
      if (::stat(path.c_str(), &current) != 0) {
        if (errno == ENOENT) return Status::PreconditionFailed(key + " does not exist");
        return Status::FromErrno(errno, "stat");
      }
      if (EtagOf(current) != condition.etag) {
        return Status::PreconditionFailed(key + " has etag " + EtagOf(current) + ", not " +
                                          condition.etag);
      }
      if (::rename(staged.c_str(), path.c_str()) != 0) return Status::FromErrno(errno, "rename");
      break;
    }
  }
  return FsyncDir(DirName(path));
}

StatusOr<std::string> FileStore::Put(const std::string& key, std::string_view data,
                                     const PutCondition& condition) {
  SG_ASSIGN_OR_RETURN(const std::string path, PathFor(key));
  const std::string staged = NewStagedPath(key);
  StatusOr<std::string> etag = [&]() -> StatusOr<std::string> {
    SG_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(staged, O_WRONLY | O_CREAT | O_EXCL, 0644));
    SG_RETURN_IF_ERROR(WriteAll(fd.get(), data, staged));
    SG_ASSIGN_OR_RETURN(std::string e, FinishStaged(fd.get(), staged));
    SG_RETURN_IF_ERROR(CommitStaged(key, staged, path, condition));
    return e;
  }();
  if (!etag.ok()) {
    ::unlink(staged.c_str());
    return etag.status().WithContext("put " + key);
  }
  return etag;
}

class FileStore::Writer final : public ObjectWriter {
 public:
  Writer(FileStore& store, std::string key, std::string path, std::string staged, UniqueFd fd)
      : store_(store),
        key_(std::move(key)),
        path_(std::move(path)),
        staged_(std::move(staged)),
        fd_(std::move(fd)) {}
  ~Writer() override { Abort(); }

  Status Append(std::string data) override {
    if (!fd_.valid()) return Status::InvalidArgument("writer for " + key_ + " is closed");
    Status st = WriteAll(fd_.get(), data, staged_);
    GiveSharedBuffer(std::move(data));  // for the next frame (common/spare_buffer.h)
    return st;
  }

  StatusOr<std::string> Commit() override {
    if (!fd_.valid()) return Status::InvalidArgument("writer for " + key_ + " is closed");
    auto etag = FinishStaged(fd_.get(), staged_);
    Status st =
        etag.ok() ? store_.CommitStaged(key_, staged_, path_, PutCondition::None()) : etag.status();
    fd_.reset();
    if (!st.ok()) {
      ::unlink(staged_.c_str());
      return st.WithContext("write " + key_);
    }
    return etag;
  }

  void Abort() override {
    if (!fd_.valid()) return;
    fd_.reset();
    ::unlink(staged_.c_str());
  }

 private:
  FileStore& store_;
  const std::string key_, path_, staged_;
  UniqueFd fd_;
};

StatusOr<std::unique_ptr<ObjectWriter>> FileStore::NewWriter(const std::string& key,
                                                              uint64_t /*size_hint*/) {
  SG_ASSIGN_OR_RETURN(std::string path, PathFor(key));
  std::string staged = NewStagedPath(key);
  SG_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(staged, O_WRONLY | O_CREAT | O_EXCL, 0644));
  return std::unique_ptr<ObjectWriter>(
      new Writer(*this, key, std::move(path), std::move(staged), std::move(fd)));
}

StatusOr<int> FileStore::CleanStaleWrites(const std::string& prefix, std::chrono::seconds age,
                                          const KeyFilter& spare) {
  const auto cutoff = std::chrono::system_clock::now() - age;
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(tmp_dir_, ec)) {
    // Only the writes of keys under `prefix`; a staged file that names no
    // key (an older writer's) only when the whole store is cleaned.
    const std::optional<std::string> key = StagedKeyOf(entry.path().filename().string());
    if (!prefix.empty() && !(key && key->starts_with(prefix))) continue;
    if (spare && key && spare(*key)) continue;
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (InfoOf("", st).modified < cutoff && ::unlink(entry.path().c_str()) == 0) ++removed;
  }
  if (ec) return Status::IOError("list " + tmp_dir_ + ": " + ec.message());
  return removed;
}

StatusOr<std::string> FileStore::Get(const std::string& key, std::optional<ByteRange> range,
                                     ObjectInfo* info) {
  SG_ASSIGN_OR_RETURN(const std::string path, PathFor(key));
  auto opened = OpenFile(path, O_RDONLY);
  if (!opened.ok()) {
    if (opened.status().Is(StatusCode::kNotFound)) return Status::NotFound("no object " + key);
    return opened.status();
  }
  struct stat st {};
  if (::fstat(opened->get(), &st) != 0) return Status::FromErrno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) return Status::NotFound("no object " + key);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (info) *info = InfoOf(key, st);
  uint64_t offset = 0, length = size;
  if (range) {
    if (range->offset >= size && size > 0) {
      return Status::OutOfRange("range starts at " + std::to_string(range->offset) + " but " + key +
                                " has " + std::to_string(size) + " bytes");
    }
    offset = std::min(range->offset, size);
    length = std::min(range->length.value_or(size), size - offset);
  }
  // A large range goes into the thread's spare buffer (common/spare_buffer.h),
  // as an S3 body does: a restore's worker then holds one range, not two.
  std::string out = TakeSpareBuffer(length);
  SG_RETURN_IF_ERROR(PreadInto(opened->get(), offset, length, &out, path));
  return out;
}

StatusOr<ObjectInfo> FileStore::Head(const std::string& key) {
  SG_ASSIGN_OR_RETURN(const std::string path, PathFor(key));
  struct stat st {};
  Status s = StatPath(path, &st);
  if (s.Is(StatusCode::kNotFound)) return Status::NotFound("no object " + key);
  SG_RETURN_IF_ERROR(s);
  return InfoOf(key, st);
}

StatusOr<ListPage> FileStore::List(const std::string& prefix, const std::string& token,
                                   int max_keys) {
  namespace fs = std::filesystem;
  if (max_keys < 1) return Status::InvalidArgument("max_keys must be at least 1");
  // Walk only the deepest directory the prefix names in full.
  const size_t slash = prefix.rfind('/');
  if (slash != std::string::npos) {
    const std::string dir_part = prefix.substr(0, slash);
    for (const std::string& seg : Split(dir_part, '/')) {
      if (seg.empty() || seg == "." || seg == "..") {
        return Status::InvalidArgument("prefix \"" + prefix +
                                       "\" has an empty, '.' or '..' segment");
      }
    }
    if (prefix.starts_with(kReservedPrefix) || prefix.front() == '/') return ListPage{};
  }
  const std::string start_dir =
      slash == std::string::npos ? root_ : root_ + "/" + prefix.substr(0, slash);
  std::vector<std::pair<std::string, struct stat>> found;
  std::error_code ec;
  fs::recursive_directory_iterator it(start_dir, ec), end;
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) {
      return ListPage{};
    }
    return Status::IOError("list " + start_dir + ": " + ec.message());
  }
  for (; it != end; it.increment(ec)) {
    if (ec) return Status::IOError("list " + start_dir + ": " + ec.message());
    const std::string full = it->path().string();
    std::string key = full.substr(root_.size() + 1);
    if (it.depth() == 0 && slash == std::string::npos &&
        it->path().filename().string().starts_with(kReservedPrefix)) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (!key.starts_with(prefix) || key <= token) continue;
    struct stat st {};
    if (::lstat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    found.emplace_back(std::move(key), st);
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  ListPage page;
  const size_t n = std::min(found.size(), static_cast<size_t>(max_keys));
  for (size_t i = 0; i < n; ++i) page.objects.push_back(InfoOf(found[i].first, found[i].second));
  if (found.size() > n) page.next_token = page.objects.back().key;
  return page;
}

Status FileStore::Delete(const std::string& key) {
  SG_ASSIGN_OR_RETURN(const std::string path, PathFor(key));
  SG_ASSIGN_OR_RETURN(StoreLock lock, StoreLock::Acquire(lock_path_));
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Status::FromErrno(errno, "delete " + key);
  }
  // S3 has no directories: drop the ones this delete left empty.
  std::string dir = DirName(path);
  while (dir.size() > root_.size() && ::rmdir(dir.c_str()) == 0) dir = DirName(dir);
  return FsyncDir(dir);
}

}  // namespace sg
