// PID 1 duties (docs/design.md §11): the first process of a container's PID
// namespace inherits every orphan, and what it does not reap stays a zombie
// for the container's life.
#pragma once

namespace sg {

// Reaps every ended child of this process that no ChildProcess owns (see
// common/owned_children.h), without blocking; returns how many. Children a
// ChildProcess owns are left to it, ended or not.
int ReapOrphanedChildren();

}  // namespace sg
