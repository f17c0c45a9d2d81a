// Retention of a job of several nodes (docs/multi-node.md, docs/design.md
// §14): the newest `keep` group snapshots are kept whole, with every part
// they name; what no kept group snapshot can use any more goes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/repo/retention.h"
#include "common/clock.h"
#include "common/object_store.h"
#include "common/status.h"

namespace sg {

struct GroupGcResult {
  std::vector<uint64_t> deleted;  // group snapshots removed by retention
  uint64_t parts_deleted = 0;     // part snapshots no kept group snapshot references
  uint64_t rounds_deleted = 0;    // records of old rounds
  int abandoned = 0;              // unfinished part uploads and snapshot dirs
};

// Keeps the newest `keep` group snapshots. A part snapshot goes only when no
// kept group snapshot references it and its step is not newer than the
// newest group snapshot's (a newer part may still join the next one: group
// snapshots only commit steps newer than the newest); the records of rounds
// before the oldest kept group snapshot's go too.
// A suspect group snapshot, or one whose parts need a quarantined object
// (agent/repo/group_quarantine.h), is never counted among the kept ones.
// Keeps `options.keep` group snapshots; part dirs abandoned by their writers
// and unfinished uploads go by `options.abandoned_after` and the writers'
// claims, as one node's do (agent/repo/retention.h).
StatusOr<GroupGcResult> CollectGroupGarbage(ObjectStore& store, Clock& clock,
                                            const std::string& job, const GcOptions& options);

}  // namespace sg
