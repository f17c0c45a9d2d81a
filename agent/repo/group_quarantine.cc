// Quarantine in a job of several nodes (agent/repo/group_quarantine.h).
#include "agent/repo/group_quarantine.h"

#include <algorithm>

#include "agent/repo/quarantine.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/store_layout.h"

namespace sg {

std::set<uint64_t> GroupQuarantine::Seqs() const {
  std::set<uint64_t> out;
  for (const auto& [seq, keys] : needs) out.insert(seq);
  return out;
}

std::vector<std::string> GroupQuarantine::AllKeys() const {
  std::vector<std::string> out;
  for (const auto& [rank, keys] : lists) {
    for (const std::string& key : keys) out.push_back(PartRelativeKey(rank, key));
  }
  std::sort(out.begin(), out.end());
  return out;
}

StatusOr<GroupQuarantine> ReadGroupQuarantine(ObjectStore& store, const std::string& job,
                                              const std::vector<GroupCommit>& groups) {
  // rank -> the part seqs the group snapshots name.
  std::map<int, std::vector<uint64_t>> parts;
  for (const GroupCommit& g : groups) {
    for (const PartRecord& p : g.parts) parts[p.rank].push_back(p.seq);
  }
  GroupQuarantine out;
  for (auto& [rank, seqs] : parts) {
    const std::string part_job = PartJob(job, rank);
    SG_ASSIGN_OR_RETURN(std::set<std::string> listed, ReadQuarantine(store, part_job));
    if (listed.empty()) continue;
    SnapshotCatalog catalog(store, part_job);
    catalog.Prefetch(seqs);
    for (const GroupCommit& g : groups) {
      for (const PartRecord& p : g.parts) {
        if (p.rank != rank) continue;
        auto m = catalog.ReadManifest(p.seq);
        if (!m.ok()) continue;
        for (const std::string& key : QuarantinedReferences(*m, listed)) {
          out.needs[g.seq].push_back(PartRelativeKey(rank, key));
        }
      }
    }
    out.lists[rank] = std::move(listed);
  }
  return out;
}

}  // namespace sg
