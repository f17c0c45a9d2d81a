// Retention and cleanup of a job's snapshots (`spotguard gc`, and after every
// snapshot the agent commits).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "agent/repo/snapshot_catalog.h"
#include "common/clock.h"
#include "common/object_store.h"

namespace sg {

struct GcOptions {
  // Committed snapshots kept, newest first; at least 1. A suspect one
  // (agent/run/suspect.h), or one that needs a quarantined object
  // (agent/repo/quarantine.h), never counts: it is kept while newer than the
  // oldest kept good one.
  int keep = 3;
  // Uncommitted snapshot dirs (a claim or objects, no manifest) and
  // unfinished uploads are removed once this old, unless their writer's
  // claim is live: renewed within kClaimTtl (agent/repo/claim_keeper.h;
  // docs/design.md §4, "Live writers").
  std::chrono::seconds abandoned_after{3600};
  // Takes every writer of the job for dead, live claims too (`gc
  // --break-claims`): only when no agent or snapshot of the job is running.
  bool break_claims = false;
  // Instead of `keep`, when set: whether committed snapshot `seq` is
  // retired (a group's parts that no kept group snapshot names,
  // agent/repo/group_retention.h); it reads the manifests it needs through
  // `catalog`.
  std::function<bool(uint64_t seq, SnapshotCatalog& catalog)> retire = nullptr;
  // The job's quarantine list as the caller read it (group retention reads
  // each rank's once): not listed again. Without it, gc lists it.
  const std::set<std::string>* quarantine = nullptr;
};

struct GcResult {
  std::vector<uint64_t> deleted;    // committed snapshots removed by retention
  std::vector<uint64_t> abandoned;  // uncommitted and fenced snapshot dirs removed
  int stale_writes = 0;             // multipart uploads aborted / staged files removed
  uint64_t objects_deleted = 0;
  // Quarantine entries removed because the object they name is gone
  // (docs/design.md §4, "Quarantine").
  std::vector<std::string> unquarantined;
};

// Keeps the newest `keep` committed snapshots and removes older ones
// (manifest first, so a half-deleted snapshot is never taken for a committed
// one), removes abandoned uncommitted dirs and stale writes under the job.
StatusOr<GcResult> CollectGarbage(ObjectStore& store, Clock& clock, const std::string& job,
                                  const GcOptions& options);

}  // namespace sg
