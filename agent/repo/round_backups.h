// The backups the agent's restores leave beside the checkpoint dir, and how
// few of them it keeps (docs/design.md §7, "Backups of the checkpoint dir").
//
// A restore that replaces files it did not put there keeps them in
// `<checkpoint_dir>.spotguard-backup-<time>` (agent/repo/restore_placement.h):
// at `run`'s start over an older local checkpoint, and on a group node for
// every round ended by an interruption. A long job would fill its disk with
// them, so the agent marks each backup its own restores make and keeps the
// newest `backups_keep` (config, default 2) of those. An older one goes only
// when it holds no foreign file: every file in it is also, at the same
// relative path and with the same bytes, in the checkpoint dir or in a
// backup that stays, or was, when the backup was made, the bytes of the
// snapshot's file that replaced it (and is unchanged since). One that holds
// a foreign file stays, and is logged.
// A backup without the mark (`spotguard restore --force` by hand) is never
// removed; it stays, so its files count as kept for the others.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace sg {

// The marked backups kept per checkpoint dir unless `backups_keep` says
// otherwise (agent/config).
inline constexpr int kAgentBackupsKept = 2;
// The mark an agent's restore leaves in the backup it made (named when only
// a group node's restores marked theirs; kept so those are still known).
inline constexpr const char* kAgentBackupMark = ".spotguard-round-backup";

// Marks `backup_dir` (made by one of the agent's restores) with `why`,
// right after the restore filled `restored_dir` ("": none). Each file of the
// backup with the same bytes as the file the restore put at the same path
// is named in the mark, with its size and mtime: those bytes are the
// snapshot's, which the store holds, and while the file stays as it was it
// is not foreign.
Status MarkAgentBackup(const std::string& backup_dir, const std::string& why,
                       const std::string& restored_dir = "");

struct KeptBackup {
  std::string dir;
  std::string foreign;  // the first foreign entry found, relative to `dir`
};

struct BackupPruning {
  std::vector<std::string> removed;  // backups removed, by their paths
  // Marked backups past the newest `keep` that stay for a foreign file.
  std::vector<KeptBackup> kept;
  // `.spotguard-deleting-*` leftovers of a pruning cut short, removed now.
  std::vector<std::string> leftovers;
};

// Removes the marked backups of `checkpoint_dir` beyond the newest `keep`
// (by the time of their marks) that hold no foreign file. Each goes by a
// rename to `<checkpoint_dir>.spotguard-deleting-<time>` first, then the
// removal, which never follows a symlink and never enters another mount; a
// leftover of such a name (a pruning cut short) is removed first. Unmarked
// backups and anything else beside the checkpoint dir are left alone.
StatusOr<BackupPruning> PruneAgentBackups(const std::string& checkpoint_dir, int keep);

// What the agent's restores call once they made `backup_dir`: marks it
// with `made_by`, prunes (above) and logs, one line each, what was removed
// and which backup stays for which foreign file. Failures are logged, not
// returned: a backup that stays loses nothing.
void KeepFewAgentBackups(const std::string& checkpoint_dir, const std::string& backup_dir,
                         const std::string& made_by, int keep);

}  // namespace sg
