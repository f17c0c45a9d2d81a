// Restoring a snapshot into a checkpoint dir (docs/design.md §7): the newest
// good snapshot of the job's history (agent/repo/snapshot_catalog.h), read and
// checked by agent/repo/snapshot_file_reader.h into a temporary dir beside the
// target, which replaces the target only when all of it is good
// (agent/repo/restore_placement.h).
// A snapshot that fails its checks is reported by name and the previous one
// is tried.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/repo/manifest.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/snapshot_file_reader.h"
#include "agent/repo/snapshot_writer.h"
#include "common/object_store.h"

namespace sg {

struct RestoreOptions {
  // Workers, each with one ranged read in flight, over all files.
  int parallel_reads = DefaultParallelReads();
  // Whether a file of the target that restore did not put there may be
  // replaced by the snapshot's file of the same path (it is then kept in a
  // backup dir beside the target). Without, such a restore fails before
  // downloading anything, with reason "ForeignFiles". Other foreign files
  // are always kept in place.
  bool replace_foreign = false;
  // Called when a snapshot's download starts (again for each fallback).
  std::function<void(const Manifest&)> on_start;
  // Once set, the restore gives up (Cancelled) within a ranged read: the
  // temporary dir is removed and the target left as it was. Null: never.
  const std::atomic<bool>* cancel = nullptr;
};

struct RestoreResult {
  uint64_t seq = 0;
  std::string dir;          // where the checkpoint now is
  std::string resume_path;  // dir + "/" + manifest.resume (or dir)
  uint64_t bytes = 0;
  std::vector<std::string> rejected;   // "0000000007: <why>" for snapshots that failed
  // Objects this restore found damaged and quarantined (agent/repo/quarantine.h).
  std::vector<std::string> quarantined;
  uint64_t kept_foreign = 0;           // entries restore did not own, kept in place
  std::vector<std::string> replaced;   // foreign paths the snapshot replaced
  std::vector<std::string> unsettled;  // other entries left in the backup dir, with why
  std::string backup_dir;              // where those are now; "" when none
};

// Whether `st` is a restore refusing its target before changing anything
// for a reason the user must settle (exit 2): foreign files it would
// replace without --force, or a file system mounted below the target.
bool IsRestoreRefusal(const Status& st);

class Restorer {
 public:
  Restorer(ObjectStore& store, RestoreOptions options);

  // Restores into `target_dir` once the whole snapshot is downloaded and
  // verified, keeping every file there that restore did not put there
  // (agent/repo/restore_placement.h). With `seq`, exactly that snapshot;
  // without, the newest good one of the job's history (one listing).
  // NotFound (exit 3) when there is none.
  StatusOr<RestoreResult> Restore(const std::string& job, const std::string& target_dir,
                                  std::optional<uint64_t> seq, const ProgressFn& progress = {});

  // The newest good snapshot of `history` (SnapshotCatalog::History, read
  // once by the caller), falling back to older ones on damage; lists
  // nothing. A snapshot that references a quarantined object is passed
  // over; an object found damaged is quarantined, and every older snapshot
  // that needs it passed over too (docs/design.md §7). NotFound when the
  // history is empty.
  StatusOr<RestoreResult> RestoreNewest(const SnapshotHistory& history,
                                        const std::string& target_dir,
                                        const ProgressFn& progress = {});

 private:
  // Restores `manifest`; an object found damaged is quarantined and added
  // to `quarantined`.
  StatusOr<RestoreResult> RestoreOne(const std::string& job, const Manifest& manifest,
                                     const std::string& target_dir, const ProgressFn& progress,
                                     std::vector<std::string>& quarantined);

  ObjectStore& store_;
  const RestoreOptions options_;
};

}  // namespace sg
