// The commands for a job of several nodes (agent/cli/group_commands.h): `ls`,
// `verify` and `restore` of group snapshots, and the hint single-node
// commands give when a job holds group snapshots.
#include "agent/cli/group_commands.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "agent/config/exit_codes.h"
#include "agent/repo/repository.h"
#include "agent/repo/group_quarantine.h"
#include "agent/repo/group_restore.h"
#include "agent/repo/group_store.h"
#include "agent/repo/group_suspect.h"
#include "agent/repo/lease.h"
#include "agent/repo/progress.h"
#include "agent/repo/restorer.h"
#include "agent/repo/retention.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/snapshot_file_reader.h"
#include "agent/repo/store_names.h"
#include "common/duration.h"
#include "common/log.h"
#include "common/strings.h"

namespace sg {
namespace {

int FailGroupCommand(std::string_view command, const Status& st, int code = kExitFailure) {
  std::cerr << "spotguard " << command << ": " << st.message() << "\n";
  return code;
}

}  // namespace

std::optional<GroupCommit> FindGroup(const std::vector<GroupCommit>& groups,
                                     std::optional<uint64_t> seq,
                                     const std::set<uint64_t>& passed_over) {
  for (auto it = groups.rbegin(); it != groups.rend(); ++it) {
    if (seq ? it->seq == *seq : !passed_over.contains(it->seq)) return *it;
  }
  return std::nullopt;
}

std::optional<std::string> GroupSnapshotsHint(ObjectStore& store, const std::string& job,
                                              std::string_view to) {
  auto groups = Repository::Open(store, job).Group().Groups();
  if (!groups.ok() || groups->empty()) return std::nullopt;
  const int nodes = groups->back().nodes;
  return Format("job {} has {} group snapshot{} (nodes: {}); add --nodes {} {}", job,
                groups->size(), groups->size() == 1 ? "" : "s", nodes, nodes, to);
}

int RunGroupLs(const Config& config, ObjectStore& store, bool json) {
  auto groups = Repository::Open(store, config.job).Group().Groups();
  if (!groups.ok()) return FailGroupCommand("ls", groups.status());
  // SUSPECT: the trainers could not resume from it (agent/repo/group_suspect.h);
  // last, so the columns before it keep their places.
  auto suspect = GroupSuspects(store, config.job);
  if (!suspect.ok()) return FailGroupCommand("ls", suspect.status());
  // QUARANTINED: a part needs a quarantined object (agent/repo/group_quarantine.h).
  auto quarantine = ReadGroupQuarantine(store, config.job, *groups);
  if (!quarantine.ok()) return FailGroupCommand("ls", quarantine.status());
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  if (!json) {
    std::printf("%-10s  %-24s  %5s  %10s  %10s  %-10s  %5s  %-7s  %s\n", "SEQ", "CREATED", "NODES",
                "SIZE", "STORED", "STEP", "ROUND", "SUSPECT", "QUARANTINED");
  }
  // Newest first, as `ls` of a single node shows them.
  for (auto it = groups->rbegin(); it != groups->rend(); ++it) {
    const GroupCommit& g = *it;
    const auto needs = quarantine->needs.find(g.seq);
    const bool needs_quarantined = needs != quarantine->needs.end();
    if (json) {
      nlohmann::ordered_json parts = nlohmann::ordered_json::array();
      for (const PartRecord& p : g.parts) {
        parts.push_back({{"rank", p.rank},
                         {"seq", p.seq},
                         {"instance", p.instance},
                         {"size", p.bytes},
                         {"stored_size", p.stored}});
      }
      rows.push_back(
          {{"seq", g.seq},
           {"created", g.created},
           {"nodes", g.nodes},
           {"size", g.Bytes()},
           {"stored_size", g.Stored()},
           {"step", g.step},
           {"round", g.round},
           {"suspect", suspect->contains(g.seq)},
           {"parts", std::move(parts)},
           {"quarantined", needs_quarantined ? needs->second : std::vector<std::string>{}}});
    } else {
      std::printf("%-10s  %-24s  %5d  %10s  %10s  %-10lld  %5llu  %-7s  %s\n",
                  SeqName(g.seq).c_str(), g.created.c_str(), g.nodes, HumanBytes(g.Bytes()).c_str(),
                  HumanBytes(g.Stored()).c_str(), static_cast<long long>(g.step),
                  static_cast<unsigned long long>(g.round), suspect->contains(g.seq) ? "yes" : "-",
                  needs_quarantined ? "yes" : "-");
    }
  }
  if (json) std::cout << rows.dump(2) << "\n";
  return kExitOk;
}

namespace {

// The group snapshot `restore --rank` restores: with `seq`, exactly that
// one; without, the newest a round would resume from: none whose parts
// need a quarantined object (docs/design.md §14, "Quarantine in a group")
// and none marked suspect. Every rank restored so chooses the same one.
struct GroupChoice {
  std::optional<GroupCommit> group;
  bool passed_over = false;  // some were passed over
};
StatusOr<GroupChoice> ChooseGroupToRestore(ObjectStore& store, const std::string& job,
                                           const std::vector<GroupCommit>& groups,
                                           std::optional<uint64_t> seq) {
  GroupQuarantine quarantine;
  std::set<uint64_t> suspect;
  if (!seq) {
    SG_ASSIGN_OR_RETURN(quarantine, ReadGroupQuarantine(store, job, groups));
    SG_ASSIGN_OR_RETURN(suspect, GroupSuspects(store, job));
  }
  std::set<uint64_t> passed_over = quarantine.Seqs();
  passed_over.insert(suspect.begin(), suspect.end());
  GroupChoice out{FindGroup(groups, seq, passed_over), !passed_over.empty()};
  const std::optional<GroupCommit>& g = out.group;
  for (const auto& [q, keys] : quarantine.needs) {
    if (g && q < g->seq) continue;
    LogWarn("passing over group snapshot {}: it needs the quarantined object(s) {}", SeqName(q),
            Join(keys, ", "));
  }
  for (uint64_t s : suspect) {
    if (g && s < g->seq) continue;
    LogWarn("passing over group snapshot {}: it is marked suspect (`spotguard unsuspect {}` "
            "clears it)",
            SeqName(s), s);
  }
  return out;
}

}  // namespace

int RunGroupRestore(const Config& config, ObjectStore& store, std::optional<uint64_t> seq,
                    std::optional<int> rank, const std::string& target, bool force) {
  if (!rank) {
    return FailGroupCommand(
        "restore",
        Status::InvalidArgument("job " + config.job +
                                " has nodes: " + std::to_string(config.nodes) +
                                "; say which node's part to restore with --rank N"),
        kExitUsage);
  }
  auto groups = Repository::Open(store, config.job).Group().Groups();
  if (!groups.ok()) return FailGroupCommand("restore", groups.status());
  auto chosen = ChooseGroupToRestore(store, config.job, *groups, seq);
  if (!chosen.ok()) return FailGroupCommand("restore", chosen.status());
  const std::optional<GroupCommit>& g = chosen->group;
  const bool passed_over_some = chosen->passed_over;
  if (!g) {
    return FailGroupCommand(
        "restore",
        Status::NotFound(seq ? "job " + config.job + " has no group snapshot " + SeqName(*seq)
                         : passed_over_some
                             ? "every group snapshot of job " + config.job +
                                   " needs a quarantined object or is marked suspect (restore "
                                   "one with --snapshot SEQ)"
                             : "the store has no group snapshot of job " + config.job),
        seq ? kExitFailure : kExitNothingToRestore);
  }
  if (g->nodes != config.nodes) {
    return FailGroupCommand(
        "restore",
        Status::InvalidArgument("group snapshot " + SeqName(g->seq) + " was made by " +
                                std::to_string(g->nodes) + " nodes, and the config says " +
                                "nodes: " + std::to_string(config.nodes)),
        kExitUsage);
  }
  if (*rank < 0 || *rank >= g->nodes) {
    return FailGroupCommand(
        "restore",
        Status::InvalidArgument("--rank " + std::to_string(*rank) + " is not a rank of " +
                                std::to_string(g->nodes) + " nodes (0 to " +
                                std::to_string(g->nodes - 1) + ")"),
        kExitUsage);
  }
  RestoreOptions options;
  options.replace_foreign = force;
  auto result = RestoreGroupPart(store, config.job, config.preset, *g, *rank, target, options);
  if (!result.ok()) {
    // No fallback here: the other ranks must restore the same group
    // snapshot. The damage is quarantined, so the same command without
    // --snapshot, run for every rank, passes over this one.
    if (!seq && IsDamage(result.status())) {
      LogError("rank {}'s part of group snapshot {} is damaged and now quarantined; run the "
               "restore again for every rank: it passes over group snapshot {}",
               *rank, SeqName(g->seq), SeqName(g->seq));
    }
    return FailGroupCommand("restore", result.status(),
                            IsRestoreRefusal(result.status()) ? kExitUsage : kExitFailure);
  }
  LogInfo("restored rank {}'s part of group snapshot {} (step {}) into {}", *rank,
          SeqName(g->seq), g->step, result->dir);
  std::cout << result->resume_path << "\n";
  return kExitOk;
}

}  // namespace sg
