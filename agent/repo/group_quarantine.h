// Quarantine in a job of several nodes (docs/design.md §4, "Quarantine", and
// §14, "Quarantine in a group"). Each rank's parts are snapshots of its part
// job PartJob(job, rank), so a damaged object of a part is quarantined in
// that part job's own list (agent/repo/quarantine.h, the same format). A
// group snapshot needs a quarantined object when any of its parts does: the
// coordinator never plans a round from it, `restore --rank` without a seq
// passes over it, and group retention never counts it among the `keep` good
// ones.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/repo/group_protocol.h"
#include "common/object_store.h"
#include "common/status.h"

namespace sg {

// What the quarantine lists of a group's ranks say about its group snapshots.
struct GroupQuarantine {
  // rank -> its quarantined keys, relative to "<job>/nodes/<rank>/".
  std::map<int, std::set<std::string>> lists;
  // group seq -> the quarantined objects its parts reference, relative to
  // "<job>/" (PartRelativeKey, agent/repo/store_layout.h), for each group snapshot that needs one.
  std::map<uint64_t, std::vector<std::string>> needs;

  // The group seqs that need a quarantined object.
  std::set<uint64_t> Seqs() const;
  // Every quarantined key of the group, relative to "<job>/", sorted.
  std::vector<std::string> AllKeys() const;
};

// Reads the quarantine list of every rank that `groups` name (one LIST each)
// and, for a rank whose list is not empty, the manifests of its parts that
// `groups` name. A part whose manifest cannot be read is left out: its group
// snapshot is no good one anyway (its restore fails and ends the round).
StatusOr<GroupQuarantine> ReadGroupQuarantine(ObjectStore& store, const std::string& job,
                                              const std::vector<GroupCommit>& groups);

}  // namespace sg
