// How a restored snapshot is put into place without losing anything that
// was there (docs/design.md, "Restore never deletes what it did not put
// there").
//
// A restore downloads and verifies into a temporary directory beside the
// target. Before the swap, every entry of the target that restore did not
// put there itself ("foreign": the trainer's logs, a tokenizer, older
// checkpoints, a user's dotfiles) is hard-linked (copied where links are
// impossible) into the temporary directory, at the same relative path. Then
// one renameat2(RENAME_EXCHANGE) swaps the two directories: the target is the
// old contents or the whole new ones, never a mix. The old contents are then
// settled: what restore owned and what was carried over is removed, anything
// created during the swap is moved into the target, and a foreign file that
// the snapshot replaced is kept in a backup directory beside the target,
// never deleted.
//
// What restore owns is recorded in a marker file in the directory it fills
// (agent/repo/restore_marker.h).
//
// A file system mounted below the target is refused, never crossed: the swap
// would carry the mount away with the old contents (a mount point cannot be
// renamed apart from its directory), a hard link cannot join two mounts, and
// a copy followed by the settling's unlink would delete the files on it
// (docs/design.md §7, "Mounts below the target").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/repo/restore_marker.h"
#include "common/status.h"

namespace sg {

// Foreign paths of `target` that the snapshot's `paths` would replace
// (the same path, or a path through it). Empty when `target` does not exist.
std::vector<std::string> ForeignConflicts(const std::string& target,
                                          const std::vector<std::string>& paths);

// The reason of the refusals of a file system mounted below a directory that
// restore would swap (InvalidArgument: exit 2).
inline constexpr char kMountBelowReason[] = "MountBelow";

// InvalidArgument with reason kMountBelowReason naming every mount point
// below `dir` (`what` names the directory, e.g. "restore target /ckpt"); Ok
// when there is none.
Status CheckNoMountBelow(const std::string& dir, const std::string& what);

struct Placement {
  uint64_t carried = 0;               // foreign files (not directories) kept in the target
  std::vector<std::string> replaced;  // foreign paths the snapshot replaced
  // Entries of the old contents that settling left for another reason (a
  // mount point that appeared after the checks, an unlink that failed), each
  // with why.
  std::vector<std::string> unsettled;
  std::string backup_dir;  // where those are now; "" when none
};

// What a person reads about a backup dir: how many replaced files and
// unsettled entries it holds, with an example of each, never a count of 0;
// "... are kept in <backup_dir>".
std::string DescribeBackup(const std::vector<std::string>& replaced,
                           const std::vector<std::string>& unsettled, const std::string& target,
                           const std::string& backup_dir);

// REQUIRES: `staged` holds the verified snapshot and its marker, and sits
// beside `target` on the same filesystem. Carries the target's foreign
// entries into `staged`, swaps the two atomically (or renames `staged` into
// place when there is no target) and settles the old contents. A mount
// below the target (a directory on another mount, or a file no link can
// reach) fails it before the swap, as CheckNoMountBelow does, with the
// target untouched.
StatusOr<Placement> PlaceRestoredDir(const std::string& staged, const std::string& target);

// Removes a temporary restore dir that was never swapped (it holds only the
// restore's download, its marker and links to the target's files), marker
// last, so that a kill halfway leaves it recognisable as such.
Status DiscardUnswappedRestoreDir(const std::string& dir);

// A temporary dir of a restore that did not finish. Before the swap it holds
// only that restore's files and links (its own marker, whose id is `id`), and
// is removed; after the swap it holds the target's previous contents, which
// are settled as PlaceRestoredDir would have.
Status RecoverAbandonedRestoreDir(const std::string& dir, const std::string& id,
                                  const std::string& target);

}  // namespace sg
