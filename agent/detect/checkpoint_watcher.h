// Watches checkpoint_dir and knows which files are still settling: being
// written, or written, closed or renamed in less than the settle time ago.
// That is what the preset rules (agent/detect/presets.h) need to tell a complete
// checkpoint from one in progress. Single-threaded: call it from one loop.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/detect/checkpoint.h"
#include "agent/detect/presets.h"
#include "common/clock.h"
#include "common/inotify_watcher.h"
#include "common/status.h"

namespace sg {

class CheckpointWatcher {
 public:
  // Starts watching `checkpoint_dir` (which must exist) recursively, leaving
  // out agent-private paths (IsAgentPrivatePath). Files that some process
  // already holds open for writing (/proc) count as being written until their
  // close is seen; the same is checked after an overflow and for directories
  // that appear.
  static StatusOr<std::unique_ptr<CheckpointWatcher>> Start(const std::string& checkpoint_dir,
                                                            std::chrono::nanoseconds settle,
                                                            Clock& clock);

  // Readable when there is news; put it in the main loop's poll/epoll set
  // and call Poll() when it is.
  int fd() const { return inotify_->fd(); }
  const std::string& checkpoint_dir() const { return dir_; }
  std::chrono::nanoseconds settle() const { return settle_; }

  // The quiet time that counts once the agent has asked the trainer for a
  // checkpoint (a notice, a stop): a file renamed in, or closed and not
  // opened for writing again, is complete after this long rather than after
  // the whole settle time, which would eat the notice's budget
  // (docs/checkpoints.md, "Settling"). The settle time when that is shorter.
  static constexpr std::chrono::milliseconds kUrgentSettle{1'000};
  void SetUrgent(bool urgent);
  // The settle time in force: settle(), or kUrgentSettle when urgent.
  std::chrono::nanoseconds Settle() const;
  // How often the kernel queue overflowed (each time everything is rescanned).
  uint64_t overflows() const { return overflows_; }
  // How often the checkpoint dir itself was deleted or moved away. Until a
  // directory is there again, CompleteCheckpoints() finds none; then it is
  // watched again (Poll() looks each time).
  uint64_t root_losses() const { return root_losses_; }
  bool dir_gone() const { return inotify_->root_gone(); }

  // Takes in the queued events without blocking; true when there were any.
  // Each change is dated by the file's ctime, so a late Poll() does not
  // delay settling; CompleteCheckpoints() and WaitForNewer() poll themselves.
  StatusOr<bool> Poll();

  // Files (relative to checkpoint_dir) that are open for writing or were
  // written, closed or renamed in less than settle() ago, by the events seen.
  std::set<std::string> Unsettled();

  // When something now settling is due to become settled, so that the loop
  // looks again then; nothing when no file is settling.
  std::optional<Clock::MonoTime> NextSettle();

  // The complete checkpoints now, newest first. Besides the events, a file
  // whose mtime is within settle() of the clock's wall time counts as
  // settling (this covers what the start and an overflow could not see).
  // The directory is listed again only when the last answer may be out of
  // date: an event came since, a file was settling then, the detector is
  // another, or kRelistAfter passed (docs/checkpoints.md, "Looking again").
  StatusOr<std::vector<Checkpoint>> CompleteCheckpoints(const CheckpointDetector& detector);
  // The longest a quiet directory's answer is given again without a listing:
  // what no event reports (an mtime set by hand, a write through a mapping)
  // is seen this much later at most.
  static constexpr std::chrono::seconds kRelistAfter{1};
  // The next CompleteCheckpoints lists the directory (the detector's
  // settings changed).
  void Relist() { last_look_.reset(); }
  // How often CompleteCheckpoints listed the directory.
  uint64_t listings() const { return listings_; }

  // Waits until a complete checkpoint newer than `after` (any, without one)
  // exists and returns the newest such, or nothing once `deadline` passes.
  // Sleeps on the clock in slices of at most 50 ms between looks.
  StatusOr<std::optional<Checkpoint>> WaitForNewer(const CheckpointDetector& detector,
                                                   const std::optional<CheckpointMark>& after,
                                                   Clock::MonoTime deadline);

 private:
  struct FileState {
    Clock::MonoTime last_change;
    bool writing = false;  // created or modified, not closed since
  };

  CheckpointWatcher(std::string dir, std::chrono::nanoseconds settle, Clock& clock,
                    std::unique_ptr<InotifyWatcher> inotify);
  void Forget(const std::string& path);
  Status TakeInDirectory(const std::string& rel);
  void MarkOpenForWriting(const std::string& rel);
  Clock::MonoTime ChangedAt(const std::string& rel, Clock::WallTime wall_now,
                            Clock::MonoTime mono_now) const;

  std::string dir_;
  std::chrono::nanoseconds settle_;
  bool urgent_ = false;
  Clock& clock_;
  std::unique_ptr<InotifyWatcher> inotify_;
  std::map<std::string, FileState> recent_;  // only files that may be settling
  std::optional<Clock::MonoTime> listing_next_settle_;
  // The last answer of CompleteCheckpoints while it holds: the events seen
  // (changes_) and the detector it was for, and when it was listed.
  struct LastLook {
    uint64_t changes = 0;
    const CheckpointDetector* detector = nullptr;
    Clock::MonoTime at;
    std::vector<Checkpoint> complete;
  };
  std::optional<LastLook> last_look_;
  uint64_t changes_ = 0;  // Polls that took in an event or a directory back
  uint64_t listings_ = 0;
  uint64_t overflows_ = 0;
  uint64_t root_losses_ = 0;
};

// Files in `files` whose mtime is within `settle` of `now` (either side, so a
// clock step does not hold a file back forever).
std::set<std::string> RecentlyModified(const std::vector<ListedFile>& files, Clock::WallTime now,
                                       std::chrono::nanoseconds settle);

// One look without a watcher (e.g. `spotguard snapshot` run by hand): lists
// the detector's checkpoint_dir and takes recently modified files as
// settling.
StatusOr<std::vector<Checkpoint>> DetectSettledNow(const CheckpointDetector& detector,
                                                   std::chrono::nanoseconds settle, Clock& clock);

// DetectSettledNow for a command run right after a checkpoint was written
// (`spotguard snapshot`): while nothing has settled and files are still
// settling, waits one settle time and looks again, at most `looks` times.
// A dir whose files keep changing gives what has settled by then.
StatusOr<std::vector<Checkpoint>> DetectOnceSettled(const CheckpointDetector& detector,
                                                    std::chrono::nanoseconds settle, Clock& clock,
                                                    int looks = 5);

}  // namespace sg
