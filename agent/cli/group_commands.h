// `ls`, `status`, `verify`, `gc` and `restore` for a job of several nodes
// (`nodes` > 1; docs/multi-node.md): they show and handle group snapshots
// (agent/repo/group_store.h), and retention keeps `keep` whole group snapshots.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "agent/config/config.h"
#include "agent/repo/group_protocol.h"
#include "common/object_store.h"

namespace sg {

int RunGroupLs(const Config& config, ObjectStore& store, bool json);

// For `ls`, `status` and `restore` run without `nodes` on a job that holds
// group snapshots, which they would otherwise call "none": "job J has N
// group snapshots (nodes: K); add --nodes K <to>". nullopt when the job holds
// none, or they cannot be listed.
std::optional<std::string> GroupSnapshotsHint(ObjectStore& store, const std::string& job,
                                              std::string_view to = "to see them");
// `verify` of a group snapshot (`seq`, the newest without): every part is
// read back and checked, a damaged object is quarantined in its rank's part
// job, and every quarantined object of the group is named (verify_command.cc;
// docs/design.md §14, "Quarantine in a group").
int RunGroupVerify(const Config& config, ObjectStore& store, std::optional<uint64_t> seq);
// Group snapshot `seq` of `groups` (oldest first); without a seq, the newest
// not in `passed_over`.
std::optional<GroupCommit> FindGroup(const std::vector<GroupCommit>& groups,
                                     std::optional<uint64_t> seq,
                                     const std::set<uint64_t>& passed_over = {});
// Restores rank `rank`'s part of group snapshot `seq` (the newest without).
// A group snapshot of another node count than config.nodes is refused (exit 2).
// `spotguard reset-failure`: removes group/failed.json (a job of one node
// keeps none; it says so); exit 0 also when there is nothing to clear.
int RunResetFailureCommand(const Config& config, const std::map<std::string, std::string>& env);
int RunGroupRestore(const Config& config, ObjectStore& store, std::optional<uint64_t> seq,
                    std::optional<int> rank, const std::string& target, bool force);

}  // namespace sg
