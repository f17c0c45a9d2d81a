#include "agent/detect/checkpoint_watcher.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

#include "common/log.h"
#include "common/open_files.h"

namespace sg {
namespace {

constexpr std::chrono::milliseconds kWaitSlice(50);

bool IsAtOrUnder(const std::string& path, const std::string& dir) {
  return path == dir ||
         (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
}

}  // namespace

// Events are read some time after they happen; the inode's ctime (set by
// every write and by a rename) says when. Never later than now, and now when
// the ctime cannot be had or lies ahead of the clock.
Clock::MonoTime CheckpointWatcher::ChangedAt(const std::string& rel, Clock::WallTime wall_now,
                                             Clock::MonoTime mono_now) const {
  struct stat st {};
  if (::lstat((dir_ + "/" + rel).c_str(), &st) != 0) return mono_now;
  const Clock::WallTime ctime(std::chrono::duration_cast<Clock::WallTime::duration>(
      std::chrono::seconds(st.st_ctim.tv_sec) + std::chrono::nanoseconds(st.st_ctim.tv_nsec)));
  if (ctime >= wall_now) return mono_now;
  return mono_now - std::chrono::duration_cast<Clock::MonoTime::duration>(wall_now - ctime);
}

CheckpointWatcher::CheckpointWatcher(std::string dir, std::chrono::nanoseconds settle, Clock& clock,
                                     std::unique_ptr<InotifyWatcher> inotify)
    : dir_(std::move(dir)), settle_(settle), clock_(clock), inotify_(std::move(inotify)) {}

StatusOr<std::unique_ptr<CheckpointWatcher>> CheckpointWatcher::Start(
    const std::string& checkpoint_dir, std::chrono::nanoseconds settle, Clock& clock) {
  SG_ASSIGN_OR_RETURN(std::unique_ptr<InotifyWatcher> inotify,
                      InotifyWatcher::Open(checkpoint_dir, [](std::string_view rel) {
                        return IsAgentPrivatePath(rel);
                      }));
  const std::string dir = inotify->root();
  LogDebug("watching {} ({} directories, settle {} ms)", dir, inotify->watched_dirs(),
           std::chrono::duration_cast<std::chrono::milliseconds>(settle).count());
  std::unique_ptr<CheckpointWatcher> watcher(
      new CheckpointWatcher(dir, settle, clock, std::move(inotify)));
  watcher->MarkOpenForWriting("");
  return watcher;
}

// Files a writer already had open before the watch could see it: their close
// is still to come as an event, since the watch is in place by now.
void CheckpointWatcher::MarkOpenForWriting(const std::string& rel) {
  char* real = ::realpath(dir_.c_str(), nullptr);
  const std::string root = real != nullptr ? real : dir_;
  std::free(real);
  auto open = FilesOpenForWriting(rel.empty() ? root : root + "/" + rel);
  if (!open.ok()) {
    LogDebug("cannot tell which files are open for writing: {}", open.status().ToString());
    return;
  }
  const Clock::MonoTime now = clock_.Monotonic();
  for (const std::string& path : *open) {
    const std::string relpath = path.substr(root.size() + 1);
    if (IsAgentPrivatePath(relpath)) continue;
    recent_[relpath] = {now, true};
  }
}

std::chrono::nanoseconds CheckpointWatcher::Settle() const {
  return urgent_ ? std::min<std::chrono::nanoseconds>(settle_, kUrgentSettle) : settle_;
}

void CheckpointWatcher::SetUrgent(bool urgent) {
  if (urgent && !urgent_) {
    LogDebug("a checkpoint was asked for: closed files settle after {} ms",
             std::chrono::duration_cast<std::chrono::milliseconds>(Settle()).count());
  }
  urgent_ = urgent;
}

void CheckpointWatcher::Forget(const std::string& path) {
  for (auto it = recent_.lower_bound(path); it != recent_.end() && it->first.starts_with(path);) {
    if (IsAtOrUnder(it->first, path)) {
      it = recent_.erase(it);
    } else {
      ++it;
    }
  }
}

// A directory created or renamed in: what it holds appeared just now.
Status CheckpointWatcher::TakeInDirectory(const std::string& rel) {
  auto files = ListCheckpointDir(dir_ + "/" + rel);
  if (!files.ok()) {
    if (files.status().Is(StatusCode::kNotFound)) return Status::Ok();  // gone again
    return files.status();
  }
  const Clock::WallTime wall = clock_.Now();
  const Clock::MonoTime mono = clock_.Monotonic();
  // The files appeared when the directory did (its ctime changes when it is
  // renamed in), unless they were written later.
  const Clock::MonoTime dir_changed = ChangedAt(rel, wall, mono);
  for (const ListedFile& f : *files) {
    const std::string path = rel + "/" + f.relpath;
    FileState& state = recent_[path];
    state.last_change = std::max({state.last_change, dir_changed, ChangedAt(path, wall, mono)});
  }
  // Files created before the directory was watched, still being written.
  MarkOpenForWriting(rel);
  return Status::Ok();
}

StatusOr<bool> CheckpointWatcher::Poll() {
  if (inotify_->root_gone()) {
    SG_ASSIGN_OR_RETURN(const bool back, inotify_->Rewatch());
    if (!back) return false;
    // What the new directory holds was not seen being written: judge it by
    // the mtimes and open files, as at the start.
    recent_.clear();
    MarkOpenForWriting("");
    ++changes_;
    LogInfo("checkpoint dir {} is back; watching it again", dir_);
  }
  SG_ASSIGN_OR_RETURN(std::vector<WatchEvent> events, inotify_->ReadEvents());
  if (!events.empty()) ++changes_;
  const Clock::WallTime wall = clock_.Now();
  const Clock::MonoTime mono = clock_.Monotonic();
  for (const WatchEvent& ev : events) {
    switch (ev.kind) {
      case WatchEvent::Kind::kCreated:
      case WatchEvent::Kind::kModified:
        recent_[ev.path] = {ChangedAt(ev.path, wall, mono), true};
        break;
      case WatchEvent::Kind::kClosedWrite:
      case WatchEvent::Kind::kMovedIn:
        recent_[ev.path] = {ChangedAt(ev.path, wall, mono), false};
        break;
      case WatchEvent::Kind::kMovedOut:
      case WatchEvent::Kind::kDeleted:
        Forget(ev.path);
        break;
      case WatchEvent::Kind::kDirAdded:
        SG_RETURN_IF_ERROR(TakeInDirectory(ev.path));
        break;
      case WatchEvent::Kind::kOverflow:
        // Closes may have been lost: what is known is stale. From here on the
        // mtimes tell what is settling, as at the start.
        ++overflows_;
        recent_.clear();
        MarkOpenForWriting("");
        LogWarn("inotify queue overflowed for {}; rescanning (overflow #{})", dir_, overflows_);
        break;
      case WatchEvent::Kind::kRootGone:
        ++root_losses_;
        recent_.clear();
        LogWarn(
            "checkpoint dir {} was deleted or moved away: no snapshot can be taken until it "
            "exists again; waiting for it to be re-created",
            dir_);
        break;
    }
  }
  return !events.empty();
}

std::set<std::string> CheckpointWatcher::Unsettled() {
  const Clock::MonoTime now = clock_.Monotonic();
  std::set<std::string> out;
  for (auto it = recent_.begin(); it != recent_.end();) {
    if (it->second.writing || now - it->second.last_change < Settle()) {
      out.insert(it->first);
      ++it;
    } else {
      it = recent_.erase(it);  // settled: nothing more to remember
    }
  }
  return out;
}

std::optional<Clock::MonoTime> CheckpointWatcher::NextSettle() {
  std::optional<Clock::MonoTime> next = listing_next_settle_;
  if (next && *next <= clock_.Monotonic()) next.reset();
  for (const auto& [path, state] : recent_) {
    if (state.writing) continue;  // settles only after its close
    const Clock::MonoTime at = state.last_change + Settle();
    if (at > clock_.Monotonic() && (!next || at < *next)) next = at;
  }
  return next;
}

StatusOr<std::vector<Checkpoint>> CheckpointWatcher::CompleteCheckpoints(
    const CheckpointDetector& detector) {
  SG_RETURN_IF_ERROR(Poll().status());
  // Gone (deleted under us): no checkpoint, rather than an error every tick.
  if (inotify_->root_gone()) {
    last_look_.reset();
    return std::vector<Checkpoint>();
  }
  const Clock::MonoTime mono = clock_.Monotonic();
  if (last_look_ && last_look_->changes == changes_ && last_look_->detector == &detector &&
      mono >= last_look_->at && mono - last_look_->at < kRelistAfter) {
    return last_look_->complete;
  }
  last_look_.reset();
  const uint64_t changes_before = changes_;
  ++listings_;
  SG_ASSIGN_OR_RETURN(std::vector<ListedFile> files, ListCheckpointDir(dir_));
  // Events for files created while the listing was taken.
  SG_RETURN_IF_ERROR(Poll().status());
  const Clock::WallTime wall = clock_.Now();
  std::set<std::string> unsettled = RecentlyModified(files, wall, Settle());
  listing_next_settle_.reset();
  for (const ListedFile& f : files) {
    if (!unsettled.count(f.relpath)) continue;
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(f.mtime + Settle() -
                                                                           std::max(wall, f.mtime));
    const Clock::MonoTime at = mono + left;
    if (!listing_next_settle_ || at < *listing_next_settle_) listing_next_settle_ = at;
  }
  std::set<std::string> from_events = Unsettled();
  unsettled.insert(from_events.begin(), from_events.end());
  std::vector<Checkpoint> complete = detector.Detect(files, unsettled);
  // Given again until something may have changed it: only an answer with
  // nothing settling, since settling ends with time, not with an event.
  if (unsettled.empty() && !listing_next_settle_) {
    last_look_ = LastLook{changes_before, &detector, mono, complete};
  }
  return complete;
}

StatusOr<std::optional<Checkpoint>> CheckpointWatcher::WaitForNewer(
    const CheckpointDetector& detector, const std::optional<CheckpointMark>& after,
    Clock::MonoTime deadline) {
  while (true) {
    SG_ASSIGN_OR_RETURN(std::vector<Checkpoint> complete, CompleteCheckpoints(detector));
    if (std::optional<Checkpoint> found = FirstNewerThan(complete, after)) return found;
    Clock::MonoTime wake = deadline;
    if (std::optional<Clock::MonoTime> next = NextSettle()) wake = std::min(wake, *next);
    if (clock_.Monotonic() >= deadline) return std::optional<Checkpoint>();
    // Sleep until something happens in the directory or a file settles.
    while (true) {
      const Clock::MonoTime now = clock_.Monotonic();
      if (now >= wake) break;
      SG_ASSIGN_OR_RETURN(bool changed, Poll());
      if (changed) break;
      clock_.SleepFor(std::min<std::chrono::nanoseconds>(wake - now, kWaitSlice));
    }
  }
}

std::set<std::string> RecentlyModified(const std::vector<ListedFile>& files, Clock::WallTime now,
                                       std::chrono::nanoseconds settle) {
  std::set<std::string> out;
  for (const ListedFile& f : files) {
    const auto age = now > f.mtime ? now - f.mtime : f.mtime - now;
    if (age < settle) out.insert(f.relpath);
  }
  return out;
}

StatusOr<std::vector<Checkpoint>> DetectSettledNow(const CheckpointDetector& detector,
                                                   std::chrono::nanoseconds settle, Clock& clock) {
  SG_ASSIGN_OR_RETURN(std::vector<ListedFile> files, ListCheckpointDir(detector.checkpoint_dir()));
  return detector.Detect(files, RecentlyModified(files, clock.Now(), settle));
}

StatusOr<std::vector<Checkpoint>> DetectOnceSettled(const CheckpointDetector& detector,
                                                    std::chrono::nanoseconds settle, Clock& clock,
                                                    int looks) {
  for (int look = 1;; ++look) {
    SG_ASSIGN_OR_RETURN(std::vector<ListedFile> files,
                        ListCheckpointDir(detector.checkpoint_dir()));
    const std::set<std::string> settling = RecentlyModified(files, clock.Now(), settle);
    std::vector<Checkpoint> found = detector.Detect(files, settling);
    if (!found.empty() || settling.empty() || look >= looks) return found;
    clock.SleepFor(settle);
  }
}

}  // namespace sg
