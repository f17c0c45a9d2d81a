// Restoring one node's part of a group snapshot (docs/design.md §14): the
// part of its rank, plus what every node needs from rank 0's part. Used by
// the group agent when a node joins a round and by `restore --rank`.
#pragma once

#include <string>

#include "agent/config/config.h"
#include "agent/repo/group_protocol.h"
#include "agent/repo/restorer.h"
#include "common/object_store.h"
#include "common/status.h"

namespace sg {

// Restores rank `rank`'s part of `group` into `target` (Restorer::Restore of
// PartJob(job, rank)). With the dcp preset, a rank other than 0 also gets the
// `.metadata` of rank 0's checkpoint directory, written into its own resume
// directory when that has none: DCP's reader reads `.metadata` on every rank,
// and without a shared filesystem only rank 0's node wrote it. That file is
// fetched before the part is restored, so that failing to read it leaves
// `target` as it was.
StatusOr<RestoreResult> RestoreGroupPart(ObjectStore& store, const std::string& job, Preset preset,
                                         const GroupCommit& group, int rank,
                                         const std::string& target, const RestoreOptions& options);

}  // namespace sg
