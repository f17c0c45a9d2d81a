// One agent per checkpoint directory on a host (docs/agent.md, "One agent per
// checkpoint directory, and no orphans"). The lease fences instances from
// each other; this lock keeps a second agent on the SAME host (a second
// `spotguard run` by hand, a unit started twice) from swapping the checkpoint
// directory under the first one's trainer, before it touches anything.
#pragma once

#include <string>

#include "common/files.h"
#include "common/status.h"

namespace sg {

// "<parent>/.spotguard-<basename><suffix>": files that belong to a checkpoint
// dir live beside it, never inside it (they are not checkpoints), on the same
// path whichever way the parent is reached.
std::string BesideCheckpointDir(const std::string& checkpoint_dir, const std::string& suffix);

// "<parent>/.spotguard-<basename>.lock".
std::string HostLockPath(const std::string& checkpoint_dir);

// An exclusive flock(2) on HostLockPath, held until this object is destroyed
// or the process ends (however it ends: the kernel drops the lock). The
// descriptor is O_CLOEXEC so the trainer does not inherit (and keep) it.
// The file holds the holder's pid, for the message the next agent prints.
class HostLock {
 public:
  // PreconditionFailed with reason "Locked" when another process holds the
  // lock (the message names its pid and the checkpoint dir); other errors
  // when the lock file cannot be made.
  static StatusOr<HostLock> Acquire(const std::string& checkpoint_dir);

  const std::string& path() const { return path_; }

 private:
  HostLock(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd fd_;
  std::string path_;
};

// Refuses a checkpoint_dir that cannot work, before the lease is taken:
// InvalidArgument (a config error, exit 2) naming checkpoint_dir when it is a
// symlink (naming its target), not a directory, below a path component that
// is not a directory, a mount point (restore swaps the directory with a
// rename, which a mount point cannot take), or holds a mount point below it
// (CheckNoMountBelow: the swap would carry it away). A missing one is fine:
// it is created when the agent restores into it.
Status ValidateCheckpointDir(const std::string& checkpoint_dir);

}  // namespace sg
