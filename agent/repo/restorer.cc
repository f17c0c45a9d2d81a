#include "agent/repo/restorer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>

#include "agent/repo/quarantine.h"
#include "agent/repo/restore_placement.h"
#include "agent/repo/snapshot_file_reader.h"
#include "agent/repo/store_layout.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/log.h"
#include "common/mounts.h"
#include "common/strings.h"

namespace sg {
namespace {

constexpr uint64_t kFreeSpaceMargin = 64ull << 20;
constexpr char kRestoreTempInfix[] = ".spotguard-restore-";
// Restored bytes are handed to writeback in blocks of this size.
constexpr uint64_t kWritebackBlock = 1ull << 20;

// Opens (creating when missing) the directory `rel` below `root_fd`, one
// component at a time and never following a symlink, so no path can lead
// outside the restore directory.
StatusOr<UniqueFd> OpenDirBeneath(int root_fd, const std::string& rel) {
  UniqueFd current(::dup(root_fd));
  if (!current.valid()) return Status::FromErrno(errno, "dup");
  if (rel.empty()) return current;
  for (const std::string& seg : Split(rel, '/')) {
    if (::mkdirat(current.get(), seg.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::FromErrno(errno, "mkdir " + rel);
    }
    int fd = ::openat(current.get(), seg.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno(errno, "open directory " + rel);
    current.reset(fd);
  }
  return current;
}

Status CheckFreeSpace(const std::string& dir, uint64_t needed) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) return Status::FromErrno(errno, "statvfs " + dir);
  const uint64_t available = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  // Not needed + margin: that wraps for a hostile manifest's sizes.
  if (available < kFreeSpaceMargin || available - kFreeSpaceMargin < needed) {
    return Status::NoSpace("not enough free space on the disk holding " + dir +
                           ": restoring needs " + std::to_string(needed >> 20) + " MiB (and " +
                           std::to_string(kFreeSpaceMargin >> 20) + " MiB to spare) but only " +
                           std::to_string(available >> 20) + " MiB are free; nothing was changed");
  }
  return Status::Ok();
}

void DiscardTemp(const std::string& path) {
  if (Status st = DiscardUnswappedRestoreDir(path); !st.ok()) {
    LogWarn("could not remove {}: {}", path, st.message());
  }
}

// Temporary restore dirs are "<parent>/.<base>.spotguard-restore-<pid>-<hex>".
// One whose process is gone was left by a restore that was killed: before
// its swap it holds a partial download, after it the target's previous
// contents; RecoverAbandonedRestoreDir tells which and loses nothing.
void RecoverAbandonedRestoreDirs(const std::string& parent, const std::string& base) {
  const std::string prefix = "." + base + kRestoreTempInfix;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string rest = name.substr(prefix.size());
    const size_t dash = rest.find('-');
    pid_t pid = 0;
    if (dash != std::string::npos && dash > 0 && dash <= 9 &&
        rest.find_first_not_of("0123456789") == dash) {
      pid = static_cast<pid_t>(std::stol(rest.substr(0, dash)));
    }
    if (pid > 0 && (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH)) continue;
    LogInfo("cleaning up {}, left by a restore that did not finish", entry.path().string());
    const std::string target = (parent == "/" ? "" : parent) + "/" + base;
    if (Status st = RecoverAbandonedRestoreDir(entry.path().string(), rest, target); !st.ok()) {
      LogWarn("could not clean up {}: {}", entry.path().string(), st.message());
    }
  }
}

// The target must be a directory (or absent) that a rename can swap, with
// no file system mounted below it.
Status CheckRestoreTarget(const std::string& target_dir) {
  struct stat st {};
  if (::lstat(target_dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Status::FromErrno(errno, "stat " + target_dir);
  }
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    const auto real = std::filesystem::canonical(target_dir, ec);
    return Status::InvalidArgument("restore target " + target_dir + " is a symlink" +
                                   (ec ? std::string() : " to " + real.string()) +
                                   "; name the directory itself");
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument("restore target " + target_dir +
                                   " exists and is not a directory");
  }
  if (IsMountPoint(target_dir, st)) {
    // A refusal like a mount below the target: exit 2, as for any target
    // restore cannot use (IsRestoreRefusal).
    return Status::InvalidArgument(
               "restore target " + target_dir +
               " is a mount point, which restore cannot swap atomically; restore into a "
               "directory below it")
        .WithReason(kMountBelowReason);
  }
  SG_RETURN_IF_ERROR(CheckNoMountBelow(target_dir, "restore target " + target_dir));
  return CheckWritableDir(target_dir, "restore target " + target_dir);
}

}  // namespace

Restorer::Restorer(ObjectStore& store, RestoreOptions options) : store_(store), options_(options) {}

bool IsRestoreRefusal(const Status& st) {
  return st.reason() == "ForeignFiles" ||
         (st.Is(StatusCode::kInvalidArgument) && st.reason() == kMountBelowReason);
}

namespace {

// Writes one restored file below the temporary dir: created with
// O_EXCL|O_NOFOLLOW in a directory opened without following symlinks and
// allocated at its full size at once (AllocateFile: in a 4 GiB restore that
// saved a tenth of the system time, bench/analysis/03-restore.md), so
// workers write its frames in any order (pwrite); its
// permission bits set and the file fsynced once its bytes are checked. The
// directories are fsynced once each, after all files (FsyncDirsBeneath).
class RestoredFile final : public FileSink {
 public:
  static StatusOr<std::unique_ptr<FileSink>> Create(int root_fd, const ManifestFile& f) {
    const size_t slash = f.path.rfind('/');
    const std::string parent = slash == std::string::npos ? "" : f.path.substr(0, slash);
    const std::string name = slash == std::string::npos ? f.path : f.path.substr(slash + 1);
    SG_ASSIGN_OR_RETURN(UniqueFd parent_fd, OpenDirBeneath(root_fd, parent));
    int raw_fd = ::openat(parent_fd.get(), name.c_str(),
                          O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (raw_fd < 0) return Status::FromErrno(errno, "create " + f.path);
    UniqueFd out(raw_fd);
    SG_RETURN_IF_ERROR(AllocateFile(out.get(), f.size, f.path));
    return std::unique_ptr<FileSink>(new RestoredFile(f, std::move(out)));
  }

  Status WriteAt(uint64_t offset, std::string_view raw) override {
    if (raw.empty()) return Status::Ok();
    const uint64_t end = offset + raw.size();
    {
      // Workers writing the same file take turns here, asleep, rather than
      // in the kernel's inode lock, whose waiters spin while the holder
      // copies: on 2 cores that spinning took 15% of a 4 GiB restore's CPU.
      std::lock_guard<std::mutex> lock(write_mu_);
      while (!raw.empty()) {
        const ssize_t n = ::pwrite(out_.get(), raw.data(), raw.size(), static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Status::FromErrno(errno, "write " + file_.path);
        raw.remove_prefix(static_cast<size_t>(n));
        offset += static_cast<uint64_t>(n);
      }
    }
    // Starts writing back each 1 MiB block once its last piece is written
    // (a frame's pieces come in order from one worker), while the download
    // goes on, so that Finish's fsync of a large file has little left to
    // do. Advisory: the fsync is what makes the bytes durable.
    if (end % kWritebackBlock == 0 || end == file_.size) {
      const uint64_t from = (end - 1) / kWritebackBlock * kWritebackBlock;
      (void)::sync_file_range(out_.get(), static_cast<off_t>(from), static_cast<off_t>(end - from),
                              SYNC_FILE_RANGE_WRITE);
    }
    return Status::Ok();
  }

  Status ReadAt(uint64_t offset, uint64_t length, std::string* out) override {
    out->resize(length);
    uint64_t done = 0;
    while (done < length) {
      const ssize_t n =
          ::pread(out_.get(), out->data() + done, length - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno(errno, "read back " + file_.path);
      if (n == 0) return Status::Corruption("file \"" + file_.path + "\" is shorter than written");
      done += static_cast<uint64_t>(n);
    }
    return Status::Ok();
  }

  Status Finish() override {
    // Permission bits only: a manifest never makes a setuid, setgid or sticky file.
    if (::fchmod(out_.get(), file_.mode & 0777) != 0) {
      return Status::FromErrno(errno, "chmod " + file_.path);
    }
    if (::fsync(out_.get()) != 0) return Status::FromErrno(errno, "fsync " + file_.path);
    return Status::Ok();
  }

 private:
  RestoredFile(const ManifestFile& file, UniqueFd out) : file_(file), out_(std::move(out)) {}

  const ManifestFile& file_;
  UniqueFd out_;
  std::mutex write_mu_;
};

// fsyncs every directory that holds a restored file, once each, deepest
// first, so the new entries survive a crash before the swap.
Status FsyncDirsBeneath(int root_fd, const Manifest& manifest) {
  std::vector<std::string> dirs;
  for (const ManifestFile& f : manifest.files) {
    for (size_t slash = f.path.rfind('/'); slash != std::string::npos && slash > 0;
         slash = f.path.rfind('/', slash - 1)) {
      dirs.push_back(f.path.substr(0, slash));
    }
  }
  std::sort(dirs.begin(), dirs.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() > b.size() : a < b;
  });
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  for (const std::string& dir : dirs) {
    SG_ASSIGN_OR_RETURN(UniqueFd fd, OpenDirBeneath(root_fd, dir));
    if (::fsync(fd.get()) != 0) return Status::FromErrno(errno, "fsync " + dir);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<RestoreResult> Restorer::RestoreOne(const std::string& job, const Manifest& manifest,
                                             const std::string& target_dir,
                                             const ProgressFn& progress,
                                             std::vector<std::string>& quarantined) {
  const uint64_t seq = manifest.seq;
  const std::string parent = DirName(target_dir);
  // Refuse before downloading anything when nothing could be written.
  SG_RETURN_IF_ERROR(CheckWritableDir(parent, "restore target " + target_dir));
  SG_RETURN_IF_ERROR(CheckRestoreTarget(target_dir));
  std::vector<std::string> paths;
  for (const ManifestFile& f : manifest.files) paths.push_back(f.path);
  if (!options_.replace_foreign) {
    if (auto conflicts = ForeignConflicts(target_dir, paths); !conflicts.empty()) {
      const size_t shown = std::min<size_t>(conflicts.size(), 5);
      std::vector<std::string> names(conflicts.begin(), conflicts.begin() + shown);
      return Status::AlreadyExists(
                 target_dir + " holds " + std::to_string(conflicts.size()) +
                 " file(s) that spotguard did not restore and that snapshot " + SeqName(seq) +
                 " would replace: " + Join(names, ", ") +
                 (shown < conflicts.size() ? ", ..." : "") +
                 "; nothing was changed. Restore into another directory, or pass --force to "
                 "keep them in a backup directory beside it")
          .WithReason("ForeignFiles");
    }
  }
  SG_RETURN_IF_ERROR(MakeDirs(parent));
  SG_RETURN_IF_ERROR(CheckFreeSpace(parent, manifest.TotalSize()));

  const std::string base = target_dir.substr(target_dir.rfind('/') + 1);
  RecoverAbandonedRestoreDirs(parent, base);
  const std::string id = std::to_string(::getpid()) + "-" + RandomHex(4);
  const std::string temp = parent + "/." + base + kRestoreTempInfix + id;
  if (options_.on_start) options_.on_start(manifest);
  if (::mkdir(temp.c_str(), 0755) != 0) return Status::FromErrno(errno, "mkdir " + temp);
  // The marker first: it tells a later cleanup that this dir was never swapped.
  Status st = WriteRestoreMarker(temp, id, seq, {});
  if (st.ok()) {
    auto root = OpenFile(temp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    st = root.status();
    if (st.ok()) {
      SnapshotFileReader reader(store_, job, options_.parallel_reads, options_.cancel);
      st = reader.Read(
          manifest, [&](const ManifestFile& f) { return RestoredFile::Create(root->get(), f); },
          progress);
      for (std::string& key : QuarantineDamaged(store_, job, reader, st, "restore", seq)) {
        quarantined.push_back(std::move(key));
      }
      if (st.ok()) st = FsyncDirsBeneath(root->get(), manifest);
    }
  }
  if (st.ok()) st = WriteRestoreMarker(temp, id, seq, paths);
  if (st.ok()) st = FsyncDir(temp);
  if (!st.ok()) {
    DiscardTemp(temp);
    if (st.Is(StatusCode::kNoSpace)) {
      // Statvfs said it would fit (or could not see the limit, e.g. inodes).
      st = Status::NoSpace("the disk holding " + parent + " is full (" + st.message() + "); " +
                           target_dir + " was left as it was");
    }
    return st.WithContext("snapshot " + SeqName(seq));
  }
  auto placed = PlaceRestoredDir(temp, target_dir);
  if (!placed.ok()) {
    DiscardTemp(temp);  // not swapped: the download and links to the target's files
    return placed.status();
  }
  SG_RETURN_IF_ERROR(FsyncDir(parent));

  RestoreResult result;
  result.seq = seq;
  result.dir = target_dir;
  result.resume_path = manifest.resume.empty() ? target_dir : target_dir + "/" + manifest.resume;
  result.bytes = manifest.TotalSize();
  result.kept_foreign = placed->carried;
  result.replaced = placed->replaced;
  result.unsettled = placed->unsettled;
  result.backup_dir = placed->backup_dir;
  return result;
}

StatusOr<RestoreResult> Restorer::Restore(const std::string& job, const std::string& target_dir,
                                          std::optional<uint64_t> seq, const ProgressFn& progress) {
  SnapshotCatalog catalog(store_, job);
  if (seq) {
    // Exactly that one, also when it needs a quarantined object (whose
    // damage may lie in frames it does not use).
    SG_ASSIGN_OR_RETURN(Manifest manifest, catalog.ReadManifest(*seq));
    std::vector<std::string> quarantined;
    auto r = RestoreOne(job, manifest, target_dir, progress, quarantined);
    if (r.ok()) r->quarantined = std::move(quarantined);
    return r;
  }
  // The newest manifest by listing, not `latest`: a writer killed between
  // its manifest and `latest`, above a seq abandoned earlier, leaves
  // `latest` naming an older snapshot with no manifest right after it.
  SG_ASSIGN_OR_RETURN(SnapshotHistory history, catalog.History());
  return RestoreNewest(history, target_dir, progress);
}

StatusOr<RestoreResult> Restorer::RestoreNewest(const SnapshotHistory& history,
                                                const std::string& target_dir,
                                                const ProgressFn& progress) {
  const std::string& job = history.job;
  std::vector<std::string> rejected, found;
  // What is quarantined, and what this restore quarantines as it goes.
  std::set<std::string> quarantined = history.quarantined;
  for (const SnapshotHistory::Entry& entry : history.entries) {
    std::vector<std::string> bad;
    if (entry.manifest.ok()) bad = QuarantinedReferences(*entry.manifest, quarantined);
    if (!bad.empty()) {
      LogError("SNAPSHOT {} IS DAMAGED, falling back to the previous one: it needs the "
               "quarantined object(s) {}",
               SeqName(entry.seq), Join(bad, ", "));
      rejected.push_back(SeqName(entry.seq) + ": needs the quarantined object(s) " +
                         Join(bad, ", "));
      continue;
    }
    auto r = entry.manifest.ok() ? RestoreOne(job, *entry.manifest, target_dir, progress, found)
                                 : StatusOr<RestoreResult>(entry.manifest.status());
    quarantined.insert(found.begin(), found.end());
    if (r.ok()) {
      r->rejected = rejected;
      r->quarantined = found;
      return r;
    }
    if (!IsDamage(r.status())) return r.status();
    LogError("SNAPSHOT {} IS DAMAGED, falling back to the previous one: {}", SeqName(entry.seq),
             r.status().message());
    rejected.push_back(SeqName(entry.seq) + ": " + r.status().message());
  }
  if (!rejected.empty()) {
    return Status::Corruption("no good snapshot of job \"" + job + "\": " + Join(rejected, "; "));
  }
  return Status::NotFound("the store has no snapshot of job \"" + job + "\"");
}

}  // namespace sg
