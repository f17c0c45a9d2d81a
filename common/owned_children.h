// Which children of this process a ChildProcess owns: spawned and not yet
// waited for. The orphan reaper (common/orphan_reaper.h) reaps every other
// ended child and never one of these, whose exit status (and, while it is
// unreaped, its process group id) belongs to its owner (docs/design.md §11).
#pragma once

#include <sys/types.h>

#include <mutex>

namespace sg::owned_children {

// Held across a fork and the registration of its child, and by the reaper
// while it looks and reaps, so that no child is ever seen unregistered.
std::unique_lock<std::mutex> Lock();
// REQUIRES: Lock() held.
void AddLocked(pid_t pid);
bool OwnedLocked(pid_t pid);
// After the owner's waitpid returned `pid`.
void Remove(pid_t pid);

}  // namespace sg::owned_children
