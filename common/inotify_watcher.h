// Recursive inotify over a directory tree: every directory below the root is
// watched, new ones as they appear. Reports what happened to which path; what
// that means is the caller's business. The descriptor is non-blocking and
// close-on-exec, so it can sit in a poll/epoll loop.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/files.h"
#include "common/status.h"

namespace sg {

struct WatchEvent {
  enum class Kind {
    kCreated,      // IN_CREATE of a file (it is probably open for writing)
    kModified,     // IN_MODIFY: data was written
    kClosedWrite,  // IN_CLOSE_WRITE: a writer closed it
    kMovedIn,      // IN_MOVED_TO of a file: renamed into place, complete
    kMovedOut,     // IN_MOVED_FROM: renamed away (file or directory)
    kDeleted,      // IN_DELETE (file or directory)
    kDirAdded,     // a directory was created or moved in; it and everything
                   // below it are now watched; what it already holds was not
                   // reported, so the caller should scan it
    kOverflow,     // the kernel queue overflowed and events were lost; every
                   // directory is watched again; the caller should rescan all
    kRootGone,     // the root itself was deleted or moved away: nothing is
                   // watched until Rewatch() finds a directory there again
  };
  Kind kind;
  std::string path;  // relative to the root; empty for kOverflow
  bool is_dir = false;
};

std::string_view WatchEventKindName(WatchEvent::Kind kind);

class InotifyWatcher {
 public:
  // Returns true for relative paths (files or directories) that must be
  // neither watched nor reported.
  using IgnoreFn = std::function<bool(std::string_view relpath)>;

  // Watches `root` and every directory below it (symlinks not followed).
  static StatusOr<std::unique_ptr<InotifyWatcher>> Open(const std::string& root,
                                                        IgnoreFn ignore = nullptr);

  InotifyWatcher(const InotifyWatcher&) = delete;
  InotifyWatcher& operator=(const InotifyWatcher&) = delete;

  // Readable when events are queued.
  int fd() const { return fd_.get(); }
  const std::string& root() const { return root_; }
  size_t watched_dirs() const { return dirs_.size(); }

  // Everything queued now, without blocking; empty when nothing is.
  StatusOr<std::vector<WatchEvent>> ReadEvents();

  // Blocks up to `timeout` for events; true when some are queued.
  StatusOr<bool> WaitReadable(std::chrono::milliseconds timeout) const;

  // Walks the tree again: watches directories that are not watched yet and
  // drops watches of directories no longer in the tree. Done by ReadEvents
  // itself after an overflow or a directory move.
  Status Resync();

  // True after kRootGone, until Rewatch() succeeds.
  bool root_gone() const { return root_gone_; }
  // When the root is gone and a directory exists at its path again, watches
  // it (and everything below) and returns true; the caller should rescan,
  // since what the new directory already holds was not reported.
  StatusOr<bool> Rewatch();

 private:
  InotifyWatcher(UniqueFd fd, std::string root, IgnoreFn ignore);
  // Watches `rel` and the directories below it.
  Status WatchTree(const std::string& rel, std::map<int, std::string>* seen);
  std::string FullPath(const std::string& rel) const;

  UniqueFd fd_;
  std::string root_;
  IgnoreFn ignore_;
  std::map<int, std::string> dirs_;  // watch descriptor -> relative dir ("" is the root)
  bool root_gone_ = false;
};

}  // namespace sg
