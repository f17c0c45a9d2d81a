// One job's repository in the store (docs/design.md §4, "The repository"):
// the one owner of the job's keys. Commands, loops and the other
// subsystems open it for a store and a job, and ask it for what they need
// by meaning (the history, a snapshot written, restored or pruned, the
// complete marker, an event, a log segment, a rank's parts); none of them
// builds a key. The keys are agent/repo/store_layout.h's, which only
// agent/repo/ includes (tests/tools/source_layers.py); docs/format.md is
// their human description.
//
// A Repository is a handle: copying it is cheap, and it holds no state of
// its own, so each phase lists the history once (History) and hands the
// result down to what needs it (the restore, the fence, retention).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/repo/group_retention.h"
#include "agent/repo/group_store.h"
#include "agent/repo/restorer.h"
#include "agent/repo/retention.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/snapshot_writer.h"
#include "agent/repo/store_names.h"
#include "common/clock.h"
#include "common/object_store.h"

namespace sg {

// An event record as listed: its key (for reading it), its stamp and kind.
struct StoredEvent {
  std::string key;
  std::string stamp;  // CompactStamp form, "" when the name has none
  std::string kind;
};

// A shipped log segment as listed (docs/design.md §13).
struct StoredLogSegment {
  std::string key;
  LogSegmentName name;
  uint64_t size = 0;
};

class Repository {
 public:
  static Repository Open(ObjectStore& store, std::string job) {
    return Repository(store, std::move(job));
  }

  ObjectStore& store() const { return *store_; }
  const std::string& job() const { return job_; }

  // A job of several nodes: rank `rank`'s parts, snapshots of a job of
  // their own, and the group's round records.
  Repository Part(int rank) const;
  GroupStore Group() const { return GroupStore(*store_, job_); }
  // `key` of rank `rank`'s part repository, relative to this one's job:
  // how a group names a part's object.
  static std::string PartRelativeKey(int rank, std::string_view key);

  // ---- Snapshots (docs/design.md §4-§7).
  SnapshotCatalog Catalog() const { return SnapshotCatalog(*store_, job_); }
  // One listing of the history, with every admitted manifest read.
  StatusOr<SnapshotHistory> History() const { return Catalog().History(); }
  // Claims a seq, uploads `capture` and commits it (the request's job is
  // this repository's).
  StatusOr<SnapshotResult> Write(Clock& clock, const SnapshotOptions& options,
                                 const CapturedCheckpoint& capture, SnapshotRequest request,
                                 const ProgressFn& progress = {}) const;
  StatusOr<RestoreResult> Restore(const RestoreOptions& options, const std::string& target_dir,
                                  std::optional<uint64_t> seq,
                                  const ProgressFn& progress = {}) const;
  // The newest good snapshot of `history` (listed once by the caller),
  // falling back to older ones (Restorer::RestoreNewest).
  StatusOr<RestoreResult> RestoreNewest(const RestoreOptions& options,
                                        const SnapshotHistory& history,
                                        const std::string& target_dir,
                                        const ProgressFn& progress = {}) const;
  // Reads back every frame of snapshot `manifest` and checks it (`verify`):
  // the read's status, and the objects found damaged, which are quarantined
  // (relative to "<job>/"; docs/design.md §4, "Quarantine").
  struct Verified {
    Status status;
    std::vector<std::string> quarantined;
  };
  Verified Verify(const Manifest& manifest, const ProgressFn& progress = {}) const;
  // Retention and cleanup (`gc`, and after each commit).
  StatusOr<GcResult> Prune(Clock& clock, const GcOptions& options) const;
  // The same for a job of several nodes: group snapshots, every rank's
  // parts, the rounds' records (agent/repo/group_retention.h).
  StatusOr<GroupGcResult> PruneGroup(Clock& clock, const GcOptions& options) const;
  // The quarantined data objects, relative to "<job>/" (agent/repo/quarantine.h).
  StatusOr<std::set<std::string>> Quarantined() const;
  // The mark of a snapshot the trainer could not resume from (agent/run/suspect.h).
  Status MarkSuspect(uint64_t seq, const std::string& body) const;
  // NotFound when `seq` carries no mark.
  Status ClearSuspect(uint64_t seq) const;

  // ---- The job's records.
  // The complete marker: written once (create-only; PreconditionFailed when
  // it is there already), never removed.
  StatusOr<bool> IsComplete() const;
  StatusOr<std::optional<std::string>> ReadComplete() const;
  Status MarkComplete(const std::string& body) const;
  // The lease's record as stored (agent/repo/lease.h reads and writes it).
  StatusOr<std::optional<std::string>> ReadLease() const;
  // The keys of the complete marker and of the lease, to name them in a message.
  std::string CompleteName() const;
  std::string LeaseName() const;

  // An event record, create-only (agent/ledger/events.h): `stamp` in CompactStamp's form.
  Status PutEvent(std::string_view stamp, std::string_view kind, const std::string& body) const;
  // Every event record, in name order (time order).
  StatusOr<std::vector<StoredEvent>> Events() const;

  // A shipped log segment, replacing one of the same name; its key.
  StatusOr<std::string> PutLogSegment(const LogSegmentName& name, const std::string& body) const;
  // Every segment, in reading order: attempt (lease generation), then seq,
  // then first-line time; keys that are not segments are left out.
  StatusOr<std::vector<StoredLogSegment>> LogSegments() const;

  // What every key of the job starts with ("<job>/"; "" for the job ""):
  // for a probe of the store's reach.
  std::string Prefix() const;
  // Where `spotguard doctor` writes its probe objects (`id`: a fresh random
  // name); the whole store's top when the job is "".
  std::string ProbePrefix(std::string_view id) const;

 private:
  Repository(ObjectStore& store, std::string job) : store_(&store), job_(std::move(job)) {}

  ObjectStore* store_;
  std::string job_;
};

}  // namespace sg
