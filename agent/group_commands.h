// `ls`, `status`, `verify`, `gc` and `restore` for a job of several nodes
// (`nodes` > 1; docs/multi-node.md): they show and handle group snapshots
// (agent/group_store.h), and retention keeps `keep` whole group snapshots.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "agent/config.h"
#include "agent/group_protocol.h"
#include "common/clock.h"
#include "common/object_store.h"

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
// Unfinished part uploads older than `abandoned_after` are removed.
StatusOr<GroupGcResult> CollectGroupGarbage(ObjectStore& store, Clock& clock,
                                            const std::string& job, int keep,
                                            std::chrono::seconds abandoned_after);

int RunGroupLs(const Config& config, ObjectStore& store, bool json);

// For `ls`, `status` and `restore` run without `nodes` on a job that holds
// group snapshots, which they would otherwise call "none": "job J has N
// group snapshots (nodes: K); add --nodes K <to>". nullopt when the job holds
// none, or they cannot be listed.
std::optional<std::string> GroupSnapshotsHint(ObjectStore& store, const std::string& job,
                                              std::string_view to = "to see them");
int RunGroupVerify(const Config& config, ObjectStore& store, std::optional<uint64_t> seq);
// The group part of `status`: the round, its ranks with their freshness,
// who is missing, who waits, and the newest group snapshot.
StatusOr<nlohmann::ordered_json> GroupStatusJson(const Config& config, ObjectStore& store);
std::string GroupStatusText(const nlohmann::ordered_json& j);
// Restores rank `rank`'s part of group snapshot `seq` (the newest without).
// A group snapshot of another node count than config.nodes is refused (exit 2).
// `spotguard reset-failure`: removes group/failed.json (a job of one node
// keeps none; it says so); exit 0 also when there is nothing to clear.
int RunResetFailureCommand(const Config& config, const std::map<std::string, std::string>& env);
int RunGroupRestore(const Config& config, ObjectStore& store, std::optional<uint64_t> seq,
                    std::optional<int> rank, const std::string& target, bool force);

}  // namespace sg
