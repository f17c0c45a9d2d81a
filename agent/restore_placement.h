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
// (kRestoreMarkerName) with each file's inode, size and mtime: a file the
// trainer rewrote or renamed over since is no longer restore's.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace sg {

inline constexpr char kRestoreMarkerName[] = ".spotguard-restored.json";

struct RestoreMarker {
  struct File {
    std::string path;  // relative to the directory
    uint64_t inode = 0;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
  };
  std::string id;  // the id of the restore that wrote it (its temporary dir's suffix)
  uint64_t seq = 0;
  std::vector<File> files;

  // Whether `relpath`, as `st` describes it now, is still the file restore put there.
  bool Owns(const std::string& relpath, const struct stat& st) const;
  const File* Find(const std::string& relpath) const;
};

// The marker in `dir`; nullopt when there is none (or it is unreadable:
// then nothing in `dir` counts as restore's).
std::optional<RestoreMarker> ReadRestoreMarker(const std::string& dir);
// Writes the marker of restore `id` into `dir`, recording `paths` (relative
// to dir) as they are on disk now.
Status WriteRestoreMarker(const std::string& dir, const std::string& id, uint64_t seq,
                          const std::vector<std::string>& paths);

// Foreign paths of `target` that the snapshot's `paths` would replace
// (the same path, or a path through it). Empty when `target` does not exist.
std::vector<std::string> ForeignConflicts(const std::string& target,
                                          const std::vector<std::string>& paths);

struct Placement {
  uint64_t carried = 0;               // foreign files (not directories) kept in the target
  std::vector<std::string> replaced;  // foreign paths the snapshot replaced
  std::string backup_dir;             // where those are now; "" when none
};

// REQUIRES: `staged` holds the verified snapshot and its marker, and sits
// beside `target` on the same filesystem. Carries the target's foreign
// entries into `staged`, swaps the two atomically (or renames `staged` into
// place when there is no target) and settles the old contents.
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
