// The backups a group node's restores leave beside its checkpoint dir
// (docs/multi-node.md, "Limits"): a survivor of a round ended by an
// interruption restores the group snapshot over its own newer files, which
// restore keeps in `<checkpoint_dir>.spotguard-backup-<time>`. A long job
// interrupted many times would fill its disk with them, so a group node marks
// the backups its restores made and keeps only the newest few of those. A
// backup made any other way (`spotguard restore --force` by hand) carries no
// mark and is never pruned.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace sg {

// Backups of its rounds a group node keeps per checkpoint dir.
inline constexpr int kRoundBackupsKept = 2;
// The mark a group node's restore leaves in the backup it made.
inline constexpr const char* kRoundBackupMark = ".spotguard-round-backup";

// Marks `backup_dir` (made by a group node's restore) with `why`.
Status MarkRoundBackup(const std::string& backup_dir, const std::string& why);

// Removes the marked backups of `checkpoint_dir` beyond the newest `keep`
// (by the time of their marks); returns the ones removed. Unmarked backups
// and everything else beside the checkpoint dir are left alone.
StatusOr<std::vector<std::string>> PruneRoundBackups(const std::string& checkpoint_dir, int keep);

}  // namespace sg
