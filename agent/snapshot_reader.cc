#include "agent/snapshot_reader.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>

#include "agent/fencing.h"
#include "agent/restore_placement.h"
#include "common/bounded_executor.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/log.h"
#include "common/ordered_pipeline.h"
#include "common/strings.h"

namespace sg {
namespace {

// Consecutive frames are fetched together up to about this many stored bytes.
constexpr uint64_t kReadRange = 8ull << 20;
constexpr uint64_t kFreeSpaceMargin = 64ull << 20;
constexpr char kRestoreTempInfix[] = ".spotguard-restore-";

bool FallsBack(const Status& st) {
  // A snapshot that is damaged or incomplete: try the previous one. Anything
  // else (network, permissions, a full disk) would fail the older one too.
  return st.Is(StatusCode::kCorruption) || st.Is(StatusCode::kNotFound) ||
         st.Is(StatusCode::kOutOfRange);
}

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

// The target must be a directory (or absent) that a rename can swap.
Status CheckRestoreTarget(const std::string& target_dir, const std::string& parent) {
  struct stat st {
  }, parent_st{};
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
  if (::stat(parent.c_str(), &parent_st) == 0 && parent_st.st_dev != st.st_dev) {
    return Status::InvalidArgument(
        "restore target " + target_dir +
        " is a mount point, which restore cannot swap atomically; restore into a directory "
        "below it");
  }
  return CheckWritableDir(target_dir, "restore target " + target_dir);
}

}  // namespace

SnapshotCatalog::SnapshotCatalog(ObjectStore& store, std::string job)
    : store_(store), job_(std::move(job)) {}

StatusOr<std::vector<uint64_t>> SnapshotCatalog::Committed() {
  SG_ASSIGN_OR_RETURN(FenceTable fences, FenceTable::Read(store_, job_));
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> objects, ListAll(store_, SnapshotsPrefix(job_)));
  std::vector<uint64_t> seqs;
  const size_t skip = SnapshotsPrefix(job_).size();
  for (const ObjectInfo& o : objects) {
    std::string_view rest = std::string_view(o.key).substr(skip);
    if (rest.size() == 10 + std::string_view("/manifest.json").size() &&
        rest.ends_with("/manifest.json")) {
      if (auto seq = ParseSeqName(rest.substr(0, 10))) seqs.push_back(*seq);
    }
  }
  std::sort(seqs.rbegin(), seqs.rend());
  fenced_.clear();
  const uint64_t admitted_below = fences.AdmitsAnyUpTo();
  std::vector<uint64_t> admitted;
  for (uint64_t seq : seqs) {
    if (seq > admitted_below) {
      // Only the manifest knows its generation. One that cannot be read is
      // kept: ReadManifest reports the damage and restore falls back.
      auto m = ReadManifest(seq);
      if (m.ok()) {
        if (auto fence = fences.Excluding(seq, m->generation)) {
          LogWarn(
              "snapshot {} was committed by lease generation {} after generation {} took over "
              "at snapshot {}: a fenced writer's late commit, not part of the job's history",
              SeqName(seq), m->generation, fence->generation, SeqName(fence->after_seq));
          fenced_.push_back(seq);
          continue;
        }
      }
    }
    admitted.push_back(seq);
  }
  return admitted;
}

StatusOr<Manifest> SnapshotCatalog::ReadManifest(uint64_t seq) {
  if (auto it = read_.find(seq); it != read_.end()) return it->second;
  SG_ASSIGN_OR_RETURN(std::string text, store_.Get(ManifestKey(job_, seq)));
  SG_ASSIGN_OR_RETURN(Manifest m, ParseManifest(text, job_, seq));
  read_.emplace(seq, m);
  return m;
}

Restorer::Restorer(ObjectStore& store, RestoreOptions options) : store_(store), options_(options) {}

Status Restorer::ReadFile(const std::string& job, const ManifestFile& file,
                          const std::function<Status(std::string_view)>& sink,
                          const std::function<void(uint64_t)>& progress) {
  const std::string key = JobPrefix(job) + file.key;
  // Small files are one range: no pool of readers for them.
  const int parallel = file.stored_size > kReadRange ? std::max(1, options_.parallel_reads) : 1;
  BoundedExecutor readers(parallel, parallel);
  Sha256Stream sha;
  uint64_t seen = 0;
  OrderedPipeline<std::string> pipeline(readers, static_cast<size_t>(parallel),
                                        [&](std::string raw) -> Status {
                                          sha.Update(raw);
                                          seen += raw.size();
                                          if (progress) progress(raw.size());
                                          return sink(raw);
                                        });
  uint64_t stored_offset = 0;
  size_t frame = 0;
  while (frame < file.frames.size()) {
    // Frames [first, frame) in one ranged read.
    const size_t first = frame;
    const uint64_t range_offset = stored_offset;
    uint64_t range_length = 0;
    while (frame < file.frames.size() && (range_length == 0 || range_length < kReadRange)) {
      range_length += file.frames[frame];
      ++frame;
    }
    stored_offset += range_length;
    const size_t last = frame;
    SG_RETURN_IF_ERROR(pipeline.Submit([&, first, last, range_offset,
                                        range_length]() -> StatusOr<std::string> {
      auto stored = store_.Get(key, ByteRange{range_offset, range_length});
      if (!stored.ok()) {
        return Status(stored.status().code(),
                      "file \"" + file.path + "\": " + stored.status().message());
      }
      if (stored->size() != range_length) {
        return Status::Corruption("file \"" + file.path + "\": object " + file.key +
                                  " is shorter than the manifest says");
      }
      std::string raw;
      uint64_t at = 0;
      for (size_t i = first; i < last; ++i) {
        auto decoded = DecodeFrame(file.codec, std::string_view(*stored).substr(at, file.frames[i]),
                                   file.FrameRawSize(i));
        if (!decoded.ok()) {
          return Status::Corruption("file \"" + file.path + "\": frame " + std::to_string(i) +
                                    " of " + file.key + ": " + decoded.status().message());
        }
        raw += *decoded;
        at += file.frames[i];
      }
      return raw;
    }));
  }
  SG_RETURN_IF_ERROR(pipeline.Finish());
  if (seen != file.size) {
    return Status::Corruption("file \"" + file.path + "\": decoded " + std::to_string(seen) +
                              " bytes, the manifest says " + std::to_string(file.size));
  }
  if (sha.FinishHex() != file.sha256) {
    return Status::Corruption("file \"" + file.path + "\": SHA-256 does not match (object " +
                              file.key + " is damaged)");
  }
  return Status::Ok();
}

Status Restorer::Verify(const std::string& job, const Manifest& manifest,
                        const ProgressFn& progress) {
  std::vector<std::string> bad;
  uint64_t done = 0;
  for (const ManifestFile& f : manifest.files) {
    Status st = ReadFile(
        job, f, [](std::string_view) { return Status::Ok(); },
        [&](uint64_t n) {
          done += n;
          if (progress) progress(done);
        });
    if (!st.ok()) {
      if (!FallsBack(st)) return st;  // not damage: the check itself failed
      bad.push_back(st.message());
    }
  }
  if (bad.empty()) return Status::Ok();
  return Status::Corruption("snapshot " + SeqName(manifest.seq) +
                            " is damaged: " + Join(bad, "; "));
}

Status Restorer::RestoreInto(const std::string& job, const Manifest& manifest,
                             const std::string& dir, const ProgressFn& progress) {
  SG_ASSIGN_OR_RETURN(UniqueFd root, OpenFile(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW));
  std::atomic<uint64_t> done{0};
  std::mutex progress_mu;
  auto restore_file = [&](const ManifestFile& f) -> Status {
    const size_t slash = f.path.rfind('/');
    const std::string parent = slash == std::string::npos ? "" : f.path.substr(0, slash);
    const std::string name = slash == std::string::npos ? f.path : f.path.substr(slash + 1);
    SG_ASSIGN_OR_RETURN(UniqueFd parent_fd, OpenDirBeneath(root.get(), parent));
    int raw_fd = ::openat(parent_fd.get(), name.c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (raw_fd < 0) return Status::FromErrno(errno, "create " + f.path);
    UniqueFd out(raw_fd);
    SG_RETURN_IF_ERROR(ReadFile(
        job, f, [&](std::string_view raw) { return WriteAll(out.get(), raw, f.path); },
        [&](uint64_t n) {
          const uint64_t total = done += n;
          if (progress) {
            std::lock_guard<std::mutex> lock(progress_mu);
            progress(total);
          }
        }));
    // Permission bits only: a manifest never makes a setuid, setgid or sticky file.
    if (::fchmod(out.get(), f.mode & 0777) != 0) return Status::FromErrno(errno, "chmod " + f.path);
    if (::fsync(out.get()) != 0) return Status::FromErrno(errno, "fsync " + f.path);
    if (::fsync(parent_fd.get()) != 0) return Status::FromErrno(errno, "fsync " + parent);
    return Status::Ok();
  };
  // Files of one range several at a time (each costs a round trip); bigger
  // ones one at a time, their ranges fetched and decoded in parallel.
  const int parallel = std::max(1, options_.parallel_reads);
  BoundedExecutor small_files(parallel, parallel);
  for (const ManifestFile& f : manifest.files) {
    Status st = f.stored_size <= kReadRange ? small_files.Submit([&] { return restore_file(f); })
                                            : restore_file(f);
    if (!st.ok()) {
      (void)small_files.Wait();
      return st;
    }
  }
  return small_files.Wait();
}

StatusOr<RestoreResult> Restorer::RestoreOne(const std::string& job, uint64_t seq,
                                             const std::string& target_dir,
                                             const ProgressFn& progress) {
  SnapshotCatalog catalog(store_, job);
  SG_ASSIGN_OR_RETURN(Manifest manifest, catalog.ReadManifest(seq));
  const std::string parent = DirName(target_dir);
  // Refuse before downloading anything when nothing could be written.
  SG_RETURN_IF_ERROR(CheckWritableDir(parent, "restore target " + target_dir));
  SG_RETURN_IF_ERROR(CheckRestoreTarget(target_dir, parent));
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
  if (st.ok()) st = RestoreInto(job, manifest, temp, progress);
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
  result.backup_dir = placed->backup_dir;
  return result;
}

StatusOr<RestoreResult> Restorer::Restore(const std::string& job, const std::string& target_dir,
                                          std::optional<uint64_t> seq, const ProgressFn& progress) {
  if (seq) return RestoreOne(job, *seq, target_dir, progress);

  SnapshotCatalog catalog(store_, job);
  std::vector<std::string> rejected;
  std::vector<uint64_t> tried;
  auto attempt = [&](uint64_t s) -> std::optional<StatusOr<RestoreResult>> {
    tried.push_back(s);
    auto r = RestoreOne(job, s, target_dir, progress);
    if (r.ok()) {
      r->rejected = rejected;
      return r;
    }
    if (!FallsBack(r.status())) return StatusOr<RestoreResult>(r.status());
    LogError("SNAPSHOT {} IS DAMAGED, falling back to the previous one: {}", SeqName(s),
             r.status().message());
    rejected.push_back(SeqName(s) + ": " + r.status().message());
    return std::nullopt;
  };

  // The newest manifest by listing, not `latest`: a writer killed between
  // its manifest and `latest`, above a seq abandoned earlier, leaves
  // `latest` naming an older snapshot with no manifest right after it.
  SG_ASSIGN_OR_RETURN(std::vector<uint64_t> committed, catalog.Committed());
  for (uint64_t s : committed) {
    if (std::find(tried.begin(), tried.end(), s) != tried.end()) continue;
    if (auto done = attempt(s)) return *done;
  }
  if (!rejected.empty()) {
    return Status::Corruption("no good snapshot of job \"" + job + "\": " + Join(rejected, "; "));
  }
  return Status::NotFound("the store has no snapshot of job \"" + job + "\"");
}

}  // namespace sg
