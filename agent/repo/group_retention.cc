// Retention of a job of several nodes (agent/repo/group_retention.h): group
// snapshots are uncommitted first, then the parts none kept names, then the
// records of rounds before the oldest kept one.
#include "agent/repo/group_retention.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "agent/repo/group_protocol.h"
#include "agent/repo/group_quarantine.h"
#include "agent/repo/group_store.h"
#include "agent/repo/group_suspect.h"
#include "agent/repo/retention.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/store_layout.h"
#include "common/log.h"

namespace sg {
namespace {

// The index of the oldest group snapshot kept: `keep` the trainers can
// resume from. A suspect one (agent/repo/group_suspect.h), or one whose parts
// need a quarantined object (agent/repo/group_quarantine.h), is kept while it
// is newer than those, and never counted among them.
size_t FirstKeptGroup(const std::vector<GroupCommit>& groups, const std::set<uint64_t>& uncounted,
                      int keep) {
  size_t first_kept = groups.size();
  for (int good = 0; first_kept > 0 && good < keep;) {
    --first_kept;
    if (!uncounted.contains(groups[first_kept].seq)) ++good;
  }
  return first_kept;
}

// Deletes the records of rounds before `oldest_round`; returns how many
// rounds' records went.
StatusOr<uint64_t> PruneRoundRecords(ObjectStore& store, const std::string& job,
                                     uint64_t oldest_round) {
  const std::string prefix = GroupRoundsPrefix(job);
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> records, ListAll(store, prefix));
  std::set<uint64_t> rounds;
  for (const ObjectInfo& o : records) {
    const std::string rest = o.key.substr(prefix.size());
    auto round = ParseSeqName(std::string_view(rest).substr(0, 10));
    if (!round || *round >= oldest_round) continue;
    SG_RETURN_IF_ERROR(store.Delete(o.key));
    rounds.insert(*round);
  }
  return rounds.size();
}

}  // namespace

namespace {
const std::set<std::string> kNoQuarantine;
}  // namespace

StatusOr<GroupGcResult> CollectGroupGarbage(ObjectStore& store, Clock& clock,
                                            const std::string& job, const GcOptions& options) {
  const int keep = options.keep;
  if (keep < 1) return Status::InvalidArgument("keep must be at least 1");
  GroupStore group(store, job);
  SG_ASSIGN_OR_RETURN(std::vector<GroupCommit> groups, group.Groups());
  GroupGcResult result;
  SG_ASSIGN_OR_RETURN(std::set<uint64_t> suspect, GroupSuspects(store, job));
  // One LIST per rank; the parts' manifests only when a list is not empty.
  SG_ASSIGN_OR_RETURN(const GroupQuarantine quarantine, ReadGroupQuarantine(store, job, groups));
  std::set<uint64_t> uncounted = quarantine.Seqs();
  uncounted.insert(suspect.begin(), suspect.end());
  const size_t first_kept = FirstKeptGroup(groups, uncounted, keep);
  int ranks = 0;
  for (const GroupCommit& g : groups) ranks = std::max(ranks, g.nodes);
  // Uncommit the old group snapshots first: parts are only deleted once no
  // group snapshot that may be restored names them.
  for (size_t i = 0; i < first_kept; ++i) {
    SG_RETURN_IF_ERROR(store.Delete(group.GroupKey(groups[i].seq)));
    if (suspect.contains(groups[i].seq)) {
      SG_RETURN_IF_ERROR(store.Delete(GroupSuspectKey(job, groups[i].seq)));
    }
    result.deleted.push_back(groups[i].seq);
  }
  // (A plain int64_t and a flag: GCC 12 at -O2 takes an optional's value
  // read under its own has_value() check for uninitialized.)
  const bool any_group = !groups.empty();
  const int64_t newest_step = any_group ? groups.back().step : 0;
  std::set<std::pair<int, uint64_t>> referenced;
  for (size_t i = first_kept; i < groups.size(); ++i) {
    for (const PartRecord& p : groups[i].parts) referenced.insert({p.rank, p.seq});
  }
  for (int rank = 0; rank < ranks; ++rank) {
    // One node's collector on each rank's parts, with one listing and the
    // proof's second (docs/design.md §4): it uncommits the committed parts
    // that no kept group snapshot names and whose step is not newer than
    // the newest group snapshot's (group snapshots only ever commit newer
    // steps, so such a part can join no later one), and the parts whose
    // writer died before their commit; then deletes the objects no remaining
    // part references, nothing while a writer of the rank is live, and
    // unfinished uploads.
    GcOptions parts = options;
    // The rank's quarantine as group retention read it (a rank no group
    // snapshot names was not read: none is known).
    const auto listed = quarantine.lists.find(rank);
    parts.quarantine = listed != quarantine.lists.end() ? &listed->second : &kNoQuarantine;
    parts.retire = [&](uint64_t seq, SnapshotCatalog& catalog) {
      if (!any_group || referenced.contains({rank, seq})) return false;
      auto manifest = catalog.ReadManifest(seq);
      return manifest.ok() && manifest->step && *manifest->step <= newest_step;
    };
    SG_ASSIGN_OR_RETURN(GcResult r, CollectGarbage(store, clock, PartJob(job, rank), parts));
    result.parts_deleted += r.deleted.size();
    result.abandoned += static_cast<int>(r.abandoned.size()) + r.stale_writes;
  }
  if (first_kept < groups.size()) {
    SG_ASSIGN_OR_RETURN(result.rounds_deleted,
                        PruneRoundRecords(store, job, groups[first_kept].round));
  }
  if (!result.deleted.empty() || result.parts_deleted > 0) {
    LogInfo("gc of job {}: removed {} old group snapshots, {} parts and the records of {} rounds",
            job, result.deleted.size(), result.parts_deleted, result.rounds_deleted);
  }
  return result;
}

}  // namespace sg
