#include "agent/repo/round_backups.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <system_error>
#include <unordered_map>

#include "agent/repo/restore_marker.h"
#include "common/files.h"
#include "common/log.h"
#include "common/mounts.h"

namespace sg {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kCompareChunk = 1 << 20;
constexpr const char* kCopyTag = "snapshot-copy ";

using CopyMap = std::unordered_map<std::string, std::pair<int64_t, int64_t>>;

bool LstatOf(const std::string& path, struct stat* st) { return ::lstat(path.c_str(), st) == 0; }

// The lstat of `root`/`rel`, reached through real directories only: a
// symlink on the way is not the same path, and is never followed.
bool LstatBelow(const std::string& root, const std::string& rel, struct stat* st) {
  for (size_t slash = rel.find('/'); slash != std::string::npos; slash = rel.find('/', slash + 1)) {
    struct stat dir {};
    if (!LstatOf(JoinRelPath(root, rel.substr(0, slash)), &dir) || !S_ISDIR(dir.st_mode)) {
      return false;
    }
  }
  return LstatOf(JoinRelPath(root, rel), st);
}

// Whether two regular files hold the same bytes, read side by side up to
// the first difference. An error reading either says no.
bool SameBytes(const std::string& a, const std::string& b) {
  auto fa = OpenFile(a, O_RDONLY | O_NOFOLLOW);
  auto fb = OpenFile(b, O_RDONLY | O_NOFOLLOW);
  if (!fa.ok() || !fb.ok()) return false;
  for (uint64_t at = 0;; at += kCompareChunk) {
    auto ca = PreadUpTo(fa->get(), at, kCompareChunk, a);
    auto cb = PreadUpTo(fb->get(), at, kCompareChunk, b);
    if (!ca.ok() || !cb.ok() || *ca != *cb) return false;
    if (ca->size() < kCompareChunk) return true;
  }
}

// Whether the entry `rel` of `backup` (`st` its lstat) is also in one of
// `kept`, at the same path: a regular file with the same bytes (the same
// inode, or the same size and content), or a symlink to the same text.
bool AlsoKept(const std::string& backup, const std::string& rel, const struct stat& st,
              const std::vector<std::string>& kept) {
  for (const std::string& root : kept) {
    struct stat other {};
    if (!LstatBelow(root, rel, &other)) continue;
    if (S_ISREG(st.st_mode) && S_ISREG(other.st_mode)) {
      if (st.st_dev == other.st_dev && st.st_ino == other.st_ino) return true;
      if (st.st_size == other.st_size &&
          SameBytes(JoinRelPath(backup, rel), JoinRelPath(root, rel)))
        return true;
    } else if (S_ISLNK(st.st_mode) && S_ISLNK(other.st_mode)) {
      std::error_code e1, e2;
      const fs::path mine = fs::read_symlink(JoinRelPath(backup, rel), e1);
      if (!e1 && mine == fs::read_symlink(JoinRelPath(root, rel), e2) && !e2) return true;
    }
  }
  return false;
}

// "snapshot-copy <size> <mtime ns> <path>" lines of the mark, one for each
// file of `backup`/`rel` with the bytes of the file at the same path of
// `restored` (on `mount` only, symlinks not followed).
void ListSnapshotCopies(const std::string& backup, const std::string& rel,
                        const std::string& restored, uint64_t mount, std::string& out) {
  std::error_code ec;
  for (fs::directory_iterator it(JoinRelPath(backup, rel), ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string child = rel.empty() ? name : rel + "/" + name;
    struct stat st {
    }, there{};
    if (!LstatOf(JoinRelPath(backup, child), &st) || child.find('\n') != std::string::npos)
      continue;
    if (S_ISDIR(st.st_mode)) {
      auto id = MountIdOf(JoinRelPath(backup, child));
      if (id.ok() && *id == mount) ListSnapshotCopies(backup, child, restored, mount, out);
    } else if (S_ISREG(st.st_mode) && LstatBelow(restored, child, &there) &&
               S_ISREG(there.st_mode) && there.st_size == st.st_size &&
               SameBytes(JoinRelPath(backup, child), JoinRelPath(restored, child))) {
      out += std::string(kCopyTag) + std::to_string(st.st_size) + " " +
             std::to_string(MtimeNs(st)) + " " + child + "\n";
    }
  }
}

// The files the mark of `backup` names as copies of the snapshot's, by
// path: (size, mtime ns) as they were then.
CopyMap SnapshotCopies(const std::string& backup) {
  CopyMap copies;
  auto text = ReadFileToString(backup + "/" + kAgentBackupMark);
  if (!text.ok()) return copies;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with(kCopyTag)) continue;
    std::istringstream fields(line.substr(std::strlen(kCopyTag)));
    int64_t size = 0, mtime = 0;
    std::string rel;
    if (fields >> size >> mtime && fields.get() == ' ' && std::getline(fields, rel)) {
      copies[rel] = {size, mtime};
    }
  }
  return copies;
}

// The first foreign entry below `backup`/`rel` (relative to `backup`), or
// nullopt when every file there is also in one of `kept`. Directories are
// only walked; a symlink is compared, never followed; a directory on
// another mount, anything that is neither file nor symlink, and a directory
// that cannot be read are foreign.
std::optional<std::string> FirstForeign(const std::string& backup, const std::string& rel,
                                        uint64_t mount, const std::vector<std::string>& kept,
                                        const CopyMap& copies) {
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(JoinRelPath(backup, rel), ec), end; !ec && it != end;
       it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) return (rel.empty() ? "." : rel) + " (" + ec.message() + ")";
  for (const std::string& name : names) {
    if (rel.empty() && name == kAgentBackupMark) continue;
    const std::string child = rel.empty() ? name : rel + "/" + name;
    struct stat st {};
    if (!LstatOf(JoinRelPath(backup, child), &st)) continue;  // gone meanwhile
    if (S_ISDIR(st.st_mode)) {
      auto id = MountIdOf(JoinRelPath(backup, child));
      if (!id.ok() || *id != mount) return child + "/ (another mount)";
      if (auto found = FirstForeign(backup, child, mount, kept, copies)) return found;
      continue;
    }
    if (S_ISREG(st.st_mode)) {
      auto copy = copies.find(child);
      if (copy != copies.end() &&
          copy->second == std::pair<int64_t, int64_t>(st.st_size, MtimeNs(st)))
        continue;  // the snapshot's bytes, unchanged since the mark
    }
    if (!(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) || !AlsoKept(backup, child, st, kept)) {
      return child;
    }
  }
  return std::nullopt;
}

// Removes `dir` and all below it; fs::remove_all removes a symlink, never
// what it points to. A file system mounted below it is never entered.
Status RemoveWholeDir(const std::string& dir) {
  if (!MountPointsBelow(dir).empty()) {
    return Status::IOError(dir + " has a file system mounted below it; left as it is");
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) return Status::FromErrno(ec.value(), "remove " + dir);
  return Status::Ok();
}

struct Listed {
  std::vector<std::pair<fs::file_time_type, std::string>> marked;  // (mark time, name)
  std::vector<std::string> unmarked, deleting;                     // names
};

StatusOr<Listed> ListBackups(const fs::path& parent, const std::string& base) {
  const std::string backup_prefix = base + ".spotguard-backup-";
  const std::string deleting_prefix = base + ".spotguard-deleting-";
  Listed listed;
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code kind_ec;
    if (it->is_symlink(kind_ec) || !it->is_directory(kind_ec)) continue;
    if (name.starts_with(deleting_prefix)) {
      listed.deleting.push_back(name);
    } else if (name.starts_with(backup_prefix)) {
      std::error_code mark_ec;
      const fs::file_time_type at = fs::last_write_time(it->path() / kAgentBackupMark, mark_ec);
      if (mark_ec) {
        listed.unmarked.push_back(name);
      } else {
        listed.marked.emplace_back(at, name);
      }
    }
  }
  if (ec) return Status::FromErrno(ec.value(), "list " + parent.string());
  // Newest first: by the time the mark was written, right after the backup
  // was made (names of one second differ only by a random suffix).
  std::sort(listed.marked.rbegin(), listed.marked.rend());
  return listed;
}

}  // namespace

Status MarkAgentBackup(const std::string& backup_dir, const std::string& why,
                       const std::string& restored_dir) {
  std::string text = why + "\n";
  if (!restored_dir.empty()) {
    SG_ASSIGN_OR_RETURN(uint64_t mount, MountIdOf(backup_dir));
    ListSnapshotCopies(backup_dir, "", restored_dir, mount, text);
  }
  return WriteFileAtomic(backup_dir + "/" + kAgentBackupMark, text);
}

StatusOr<BackupPruning> PruneAgentBackups(const std::string& checkpoint_dir, int keep) {
  std::string trimmed = checkpoint_dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const fs::path dir(trimmed);
  const fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  const std::string base = dir.filename().string();
  SG_ASSIGN_OR_RETURN(Listed listed, ListBackups(parent, base));
  BackupPruning pruning;
  for (const std::string& name : listed.deleting) {
    if (Status st = RemoveWholeDir((parent / name).string()); !st.ok()) {
      LogWarn("{}", st.message());
      continue;
    }
    pruning.leftovers.push_back((parent / name).string());
  }
  // What stays: the checkpoint dir, every unmarked backup, the newest marked
  // ones, and each older one found to hold a foreign file.
  std::vector<std::string> kept = {trimmed};
  for (const std::string& name : listed.unmarked) kept.push_back((parent / name).string());
  const size_t newest = static_cast<size_t>(std::max(keep, 0));
  for (size_t i = 0; i < listed.marked.size(); ++i) {
    const std::string& name = listed.marked[i].second;
    const std::string path = (parent / name).string();
    if (i < newest) {
      kept.push_back(path);
      continue;
    }
    SG_ASSIGN_OR_RETURN(uint64_t mount, MountIdOf(path));
    if (std::optional<std::string> foreign =
            FirstForeign(path, "", mount, kept, SnapshotCopies(path))) {
      pruning.kept.push_back({path, *foreign});
      kept.push_back(path);
      continue;
    }
    // Renamed first: a pruning cut short leaves a name the next one removes
    // whole, never a half-removed backup that looks like any other.
    const std::string deleting =
        (parent / (base + ".spotguard-deleting-" +
                   name.substr(base.size() + std::string(".spotguard-backup-").size())))
            .string();
    if (::rename(path.c_str(), deleting.c_str()) != 0) {
      return Status::FromErrno(errno, "rename " + path + " to " + deleting);
    }
    SG_RETURN_IF_ERROR(RemoveWholeDir(deleting));
    pruning.removed.push_back(path);
  }
  return pruning;
}

void KeepFewAgentBackups(const std::string& checkpoint_dir, const std::string& backup_dir,
                         const std::string& made_by, int keep) {
  const Status marked =
      MarkAgentBackup(backup_dir,
                      made_by + "; spotguard keeps the newest " + std::to_string(keep) +
                          " such backups, and any older one that holds a file found nowhere else",
                      checkpoint_dir);
  if (!marked.ok()) LogWarn("marking {} failed: {}", backup_dir, marked.message());
  auto pruned = PruneAgentBackups(checkpoint_dir, keep);
  if (!pruned.ok()) {
    LogWarn("pruning the backups of {} failed: {}", checkpoint_dir, pruned.status().message());
    return;
  }
  for (const std::string& dir : pruned->leftovers) {
    LogInfo("removed {}, left by a pruning of backups that was cut short", dir);
  }
  for (const std::string& dir : pruned->removed) {
    LogInfo(
        "removed {}, an older backup of {}: the newest {} are kept, and each file in it was "
        "also in {}, in a kept backup or in the snapshot its restore put there",
        dir, checkpoint_dir, keep, checkpoint_dir);
  }
  for (const KeptBackup& b : pruned->kept) {
    LogWarn(
        "kept {} beyond the newest {} backups: it holds {}, which neither {} nor a kept backup "
        "holds with the same bytes",
        b.dir, keep, b.foreign, checkpoint_dir);
  }
}

}  // namespace sg
