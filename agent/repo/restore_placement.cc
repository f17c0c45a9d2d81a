#include "agent/repo/restore_placement.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "common/clock.h"
#include "common/files.h"
#include "common/log.h"
#include "common/mounts.h"
#include "common/strings.h"

namespace sg {
namespace {

namespace fs = std::filesystem;

bool Lstat(const std::string& path, struct stat* st) { return ::lstat(path.c_str(), st) == 0; }

// Names in `dir`, or an error when it cannot be read.
StatusOr<std::vector<std::string>> Names(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) return Status::IOError("list " + dir + ": " + ec.message());
  return names;
}

Status MountBelowError(const std::string& what, const std::vector<MountPoint>& mounts) {
  std::vector<std::string> named;
  for (const MountPoint& m : mounts) {
    named.push_back(m.type.empty() ? m.path : m.path + " (" + m.type + ")");
  }
  return Status::InvalidArgument(
             what + " holds a file system mounted below it: " + sg::Join(named, ", ") +
             ". Restore swaps the whole directory with a rename, which would carry the mount "
             "away, and never copies or deletes files on another file system, so nothing was "
             "changed; unmount it or mount it outside the directory, or restore into one with "
             "no mount below it")
      .WithReason(kMountBelowReason);
}

// Creates `rel`'s directories below `root` that are missing, with the modes
// of the same directories below `like` when those exist.
Status MakeParents(const std::string& root, const std::string& like, const std::string& rel) {
  size_t slash = 0;
  while ((slash = rel.find('/', slash)) != std::string::npos) {
    const std::string dir = rel.substr(0, slash++);
    struct stat st {};
    mode_t mode = 0755;
    if (Lstat(JoinRelPath(like, dir), &st) && S_ISDIR(st.st_mode)) mode = st.st_mode & 07777;
    if (::mkdir(JoinRelPath(root, dir).c_str(), mode) != 0 && errno != EEXIST) {
      return Status::FromErrno(errno, "mkdir " + JoinRelPath(root, dir));
    }
  }
  return Status::Ok();
}

// A copy of a regular file with its mode and times, where a hard link is not
// possible on the target's own file system (one without links, or a file
// at its link limit). Never across mounts: CarryEntry refuses those.
Status CopyRegularFile(const std::string& from, const std::string& to, const struct stat& st) {
  SG_ASSIGN_OR_RETURN(UniqueFd in, OpenFile(from, O_RDONLY));
  SG_ASSIGN_OR_RETURN(UniqueFd out, OpenFile(to, O_WRONLY | O_CREAT | O_EXCL, st.st_mode & 07777));
  for (uint64_t at = 0;;) {
    SG_ASSIGN_OR_RETURN(std::string chunk, PreadUpTo(in.get(), at, 1 << 20, from));
    if (chunk.empty()) break;
    SG_RETURN_IF_ERROR(WriteAll(out.get(), chunk, to));
    at += chunk.size();
  }
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (::futimens(out.get(), times) != 0) return Status::FromErrno(errno, "set times of " + to);
  if (::fsync(out.get()) != 0) return Status::FromErrno(errno, "fsync " + to);
  return Status::Ok();
}

// Puts another name for the entry `from` at `to` (which does not exist).
Status CarryEntry(const std::string& from, const std::string& to, const struct stat& st,
                  const std::string& target) {
  if (::linkat(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), 0) == 0) return Status::Ok();
  const int err = errno;
  // `to` is on the target's own mount: `from` is on another one (a file
  // bind-mounted, or below a mount that appeared after the checks).
  if (err == EXDEV) return MountBelowError("restore target " + target, {{from, ""}});
  if (S_ISREG(st.st_mode)) return CopyRegularFile(from, to, st);
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    const fs::path dest = fs::read_symlink(from, ec);
    if (!ec) fs::create_symlink(dest, to, ec);
    if (ec) return Status::IOError("copy the symlink " + from + ": " + ec.message());
    return Status::Ok();
  }
  return Status::FromErrno(err, "link " + from);
}

struct Carrier {
  const std::string& target;
  const std::string& staged;
  const std::optional<RestoreMarker>& marker;  // of the target
  uint64_t target_mount = 0;                   // MountIdOf(target)
  uint64_t carried = 0;

  // Carries the foreign entries of target/rel into staged/rel.
  Status Dir(const std::string& rel) {
    SG_ASSIGN_OR_RETURN(std::vector<std::string> names, Names(JoinRelPath(target, rel)));
    for (const std::string& name : names) {
      if (rel.empty() && name == kRestoreMarkerName) continue;
      const std::string child = rel.empty() ? name : rel + "/" + name;
      struct stat st {
      }, dst{};
      if (!Lstat(JoinRelPath(target, child), &st)) continue;  // gone meanwhile
      const bool taken = Lstat(JoinRelPath(staged, child), &dst);
      if (S_ISDIR(st.st_mode)) {
        // A mount that appeared after CheckNoMountBelow: refused the same way.
        auto mount = MountIdOf(JoinRelPath(target, child));
        if (!mount.ok() && mount.status().Is(StatusCode::kNotFound)) continue;  // gone meanwhile
        if (!mount.ok()) return mount.status();
        if (*mount != target_mount) {
          return MountBelowError("restore target " + target, {{JoinRelPath(target, child), ""}});
        }
        if (taken && !S_ISDIR(dst.st_mode)) continue;  // replaced; settling keeps it
        if (taken) {
          SG_RETURN_IF_ERROR(Dir(child));
          continue;
        }
        // Writable while it is filled (a read-only directory of the user's
        // would refuse the links), then given its own mode.
        if (::mkdir(JoinRelPath(staged, child).c_str(), 0700) != 0) {
          return Status::FromErrno(errno, "mkdir " + JoinRelPath(staged, child));
        }
        SG_RETURN_IF_ERROR(Dir(child));
        ::chmod(JoinRelPath(staged, child).c_str(), st.st_mode & 07777);
        // A directory that held only restore's own files was restore's too;
        // an empty one is somebody's and stays.
        auto kept = Names(JoinRelPath(staged, child));
        auto had = Names(JoinRelPath(target, child));
        if (kept.ok() && kept->empty() && had.ok() && !had->empty()) {
          ::rmdir(JoinRelPath(staged, child).c_str());
        }
        continue;
      }
      if (marker && marker->Owns(child, st)) continue;
      if (taken) continue;  // replaced by the snapshot; settling keeps it
      SG_RETURN_IF_ERROR(CarryEntry(JoinRelPath(target, child), JoinRelPath(staged, child), st, target));
      ++carried;
    }
    return Status::Ok();
  }
};

struct Settler {
  const std::string& old_root;
  const std::string& target;
  const std::optional<RestoreMarker>& marker;  // of the old contents
  uint64_t old_mount = 0;                      // MountIdOf(old_root)
  Placement& placement;

  void Remove(const std::string& path, const std::string& child) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      placement.unsettled.push_back(child + " (" + std::strerror(errno) + ")");
    }
  }

  // Removes from old/rel what is restore's or already in the target, and
  // moves into the target what is missing there; leaves what conflicts.
  Status Dir(const std::string& rel) {
    SG_ASSIGN_OR_RETURN(std::vector<std::string> names, Names(JoinRelPath(old_root, rel)));
    for (const std::string& name : names) {
      const std::string child = rel.empty() ? name : rel + "/" + name;
      const std::string from = JoinRelPath(old_root, child);
      // The marker goes last (Settle): killed halfway, the next cleanup must
      // still know which files were restore's.
      if (rel.empty() && name == kRestoreMarkerName) continue;
      struct stat st {
      }, tst{};
      if (!Lstat(from, &st)) continue;
      const bool there = Lstat(JoinRelPath(target, child), &tst);
      if (S_ISDIR(st.st_mode)) {
        // Only an old dir that a swap took a mount away with (a mount made
        // after the checks, or by a restore before they existed): it stays
        // as it is, with nothing on it touched.
        auto mount = MountIdOf(from);
        if (!mount.ok() && mount.status().Is(StatusCode::kNotFound)) continue;
        if (!mount.ok() || *mount != old_mount) {
          placement.unsettled.push_back(child + "/ (" +
                                        (mount.ok() ? std::string("a mount point, left untouched")
                                                    : mount.status().message()) +
                                        ")");
          continue;
        }
        if (there && !S_ISDIR(tst.st_mode)) {
          placement.replaced.push_back(child + "/");
          continue;
        }
        SG_RETURN_IF_ERROR(Dir(child));
        ::rmdir(from.c_str());  // fails, as it should, when something was kept
        continue;
      }
      if (marker && marker->Owns(child, st)) {
        Remove(from, child);
        continue;
      }
      if (!there) {
        // Created while the restore ran, or not linkable: it moves over.
        SG_RETURN_IF_ERROR(MakeParents(target, old_root, child));
        if (::rename(from.c_str(), JoinRelPath(target, child).c_str()) != 0) {
          return Status::FromErrno(errno, "move " + from + " into " + target);
        }
        ++placement.carried;
        continue;
      }
      const bool same_inode = st.st_ino == tst.st_ino && st.st_dev == tst.st_dev;
      const bool copied = S_ISREG(st.st_mode) && S_ISREG(tst.st_mode) &&
                          st.st_size == tst.st_size && MtimeNs(st) == MtimeNs(tst);
      bool same_link = false;
      if (S_ISLNK(st.st_mode) && S_ISLNK(tst.st_mode)) {
        std::error_code e1, e2;
        same_link =
            fs::read_symlink(from, e1) == fs::read_symlink(JoinRelPath(target, child), e2) && !e1 && !e2;
      }
      if (same_inode || copied || same_link) {
        Remove(from, child);
        continue;
      }
      placement.replaced.push_back(child);  // the snapshot's file took its place: keep it
    }
    return Status::Ok();
  }
};

std::string BackupName(const std::string& target) {
  std::string stamp = FormatUtc(SystemClock().Now());
  std::erase(stamp, '-');
  std::erase(stamp, ':');
  std::string name = target + ".spotguard-backup-" + stamp;
  struct stat st {};
  if (Lstat(name, &st)) name += "-" + RandomHex(3);
  return name;
}

// After the swap, `old_dir` holds the target's previous contents.
Status Settle(const std::string& old_dir, const std::string& target,
              const std::optional<RestoreMarker>& marker, Placement& placement) {
  SG_ASSIGN_OR_RETURN(uint64_t old_mount, MountIdOf(old_dir));
  Settler settler{old_dir, target, marker, old_mount, placement};
  SG_RETURN_IF_ERROR(settler.Dir(""));
  ::unlink((old_dir + "/" + kRestoreMarkerName).c_str());
  if (::rmdir(old_dir.c_str()) == 0) return Status::Ok();
  if (errno != ENOTEMPTY && errno != EEXIST) return Status::FromErrno(errno, "rmdir " + old_dir);
  if (placement.replaced.empty() && placement.unsettled.empty()) {
    // Something appeared while settling ran: name it rather than nothing.
    auto left = Names(old_dir);
    if (left.ok()) {
      for (const std::string& name : *left) placement.unsettled.push_back(name);
    }
  }
  placement.backup_dir = BackupName(target);
  if (::rename(old_dir.c_str(), placement.backup_dir.c_str()) != 0) {
    return Status::FromErrno(errno, "rename " + old_dir + " to " + placement.backup_dir);
  }
  LogWarn("{}",
          DescribeBackup(placement.replaced, placement.unsettled, target, placement.backup_dir));
  return Status::Ok();
}

}  // namespace

std::string DescribeBackup(const std::vector<std::string>& replaced,
                           const std::vector<std::string>& unsettled, const std::string& target,
                           const std::string& backup_dir) {
  std::string text;
  if (!replaced.empty()) {
    text += Format("{} file(s) of {} that the snapshot replaced (e.g. {})", replaced.size(), target,
                   replaced.front());
  }
  if (!replaced.empty() && !unsettled.empty()) text += " and ";
  if (!unsettled.empty()) {
    text +=
        Format("{} entr{} of the previous contents of {} that could not be settled (e.g. {})",
               unsettled.size(), unsettled.size() == 1 ? "y" : "ies", target, unsettled.front());
  }
  if (text.empty()) text = "the previous contents of " + target;
  return text + " are kept in " + backup_dir;
}

std::vector<std::string> ForeignConflicts(const std::string& target,
                                          const std::vector<std::string>& paths) {
  std::vector<std::string> conflicts;
  struct stat st {};
  if (!Lstat(target, &st) || !S_ISDIR(st.st_mode)) return conflicts;
  const std::optional<RestoreMarker> marker = ReadRestoreMarker(target);
  for (const std::string& p : paths) {
    // A foreign non-directory where the path needs a directory.
    for (size_t slash = p.find('/'); slash != std::string::npos; slash = p.find('/', slash + 1)) {
      const std::string dir = p.substr(0, slash);
      if (Lstat(JoinRelPath(target, dir), &st) && !S_ISDIR(st.st_mode) &&
          !(marker && marker->Owns(dir, st))) {
        conflicts.push_back(dir);
      }
    }
    if (!Lstat(JoinRelPath(target, p), &st)) continue;
    if (S_ISDIR(st.st_mode) || !(marker && marker->Owns(p, st))) conflicts.push_back(p);
  }
  std::sort(conflicts.begin(), conflicts.end());
  conflicts.erase(std::unique(conflicts.begin(), conflicts.end()), conflicts.end());
  return conflicts;
}

StatusOr<Placement> PlaceRestoredDir(const std::string& staged, const std::string& target) {
  Placement placement;
  struct stat st {};
  if (!Lstat(target, &st)) {
    if (errno != ENOENT) return Status::FromErrno(errno, "stat " + target);
    if (::rename(staged.c_str(), target.c_str()) != 0) {
      return Status::FromErrno(errno, "rename " + staged + " to " + target);
    }
    return placement;
  }
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(target + " is not a directory");
  const std::optional<RestoreMarker> marker = ReadRestoreMarker(target);
  SG_ASSIGN_OR_RETURN(uint64_t target_mount, MountIdOf(target));
  Carrier carrier{target, staged, marker, target_mount};
  SG_RETURN_IF_ERROR(carrier.Dir(""));
  placement.carried = carrier.carried;
  if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
    return Status::FromErrno(errno, "swap " + staged + " with " + target +
                                        " (is the target a mount point? restore into a "
                                        "directory below it)");
  }
  // From here the target is the new checkpoint and `staged` the old one,
  // which must not be removed wholesale: it may hold what was not carried.
  if (Status st = Settle(staged, target, marker, placement); !st.ok()) {
    LogWarn("the previous contents of {} are left in {} ({}); the next restore settles them",
            target, staged, st.message());
  }
  return placement;
}

Status CheckNoMountBelow(const std::string& dir, const std::string& what) {
  const std::vector<MountPoint> mounts = MountPointsBelow(dir);
  return mounts.empty() ? Status::Ok() : MountBelowError(what, mounts);
}

Status DiscardUnswappedRestoreDir(const std::string& dir) {
  // Everything but the marker first, then the marker, then the dir: a kill
  // halfway leaves the marker that says the rest is restore's own. (Removed
  // marker-first, the rest would look like the target's old contents and be
  // moved into it.)
  SG_ASSIGN_OR_RETURN(std::vector<std::string> names, Names(dir));
  std::error_code ec;
  for (const std::string& name : names) {
    if (name == kRestoreMarkerName) continue;
    fs::remove_all(JoinRelPath(dir, name), ec);
    if (ec) return Status::IOError("remove " + JoinRelPath(dir, name) + ": " + ec.message());
  }
  ::unlink(JoinRelPath(dir, kRestoreMarkerName).c_str());
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) return Status::FromErrno(errno, "rmdir " + dir);
  return Status::Ok();
}

Status RecoverAbandonedRestoreDir(const std::string& dir, const std::string& id,
                                  const std::string& target) {
  const std::optional<RestoreMarker> marker = ReadRestoreMarker(dir);
  std::error_code ec;
  if (marker && marker->id == id) return DiscardUnswappedRestoreDir(dir);
  Placement placement;
  struct stat st {};
  if (!Lstat(target, &st) || !S_ISDIR(st.st_mode)) {
    // Nothing to settle against: keep it all where a person can find it.
    placement.backup_dir = BackupName(target);
    if (::rename(dir.c_str(), placement.backup_dir.c_str()) != 0) {
      return Status::FromErrno(errno, "rename " + dir);
    }
    LogWarn("kept the contents of an unfinished restore of {} in {}", target, placement.backup_dir);
    return Status::Ok();
  }
  return Settle(dir, target, marker, placement);
}

}  // namespace sg
