#include "agent/group_commands.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "agent/exit_codes.h"
#include "agent/group_restore.h"
#include "agent/group_store.h"
#include "agent/group_suspect.h"
#include "agent/lease.h"
#include "agent/progress.h"
#include "agent/restorer.h"
#include "agent/retention.h"
#include "agent/snapshot_catalog.h"
#include "agent/snapshot_file_reader.h"
#include "agent/store_layout.h"
#include "common/duration.h"
#include "common/log.h"
#include "common/strings.h"

namespace sg {
namespace {

constexpr const char* kHowToGoOn =
    "fix the trainer, then run `spotguard reset-failure` with the job's config; a node whose "
    "command or config differs from the failed one clears it on its own";

int FailGroupCommand(std::string_view command, const Status& st, int code = kExitFailure) {
  std::cerr << "spotguard " << command << ": " << st.message() << "\n";
  return code;
}

// Deletes every object of snapshot `seq` of `job`, the manifest first, so
// that what remains of it is never restored.
StatusOr<uint64_t> DeleteSnapshot(ObjectStore& store, const std::string& job, uint64_t seq,
                                  const std::vector<std::string>& keys) {
  uint64_t n = 0;
  const std::string manifest = ManifestKey(job, seq);
  if (std::find(keys.begin(), keys.end(), manifest) != keys.end()) {
    SG_RETURN_IF_ERROR(store.Delete(manifest));
    ++n;
  }
  for (const std::string& key : keys) {
    if (key == manifest) continue;
    SG_RETURN_IF_ERROR(store.Delete(key));
    ++n;
  }
  return n;
}

std::optional<GroupCommit> FindGroup(const std::vector<GroupCommit>& groups,
                                     std::optional<uint64_t> seq) {
  if (groups.empty()) return std::nullopt;
  if (!seq) return groups.back();
  for (const GroupCommit& g : groups) {
    if (g.seq == *seq) return g;
  }
  return std::nullopt;
}

}  // namespace

StatusOr<GroupGcResult> CollectGroupGarbage(ObjectStore& store, Clock& clock,
                                            const std::string& job, int keep,
                                            std::chrono::seconds abandoned_after) {
  if (keep < 1) return Status::InvalidArgument("keep must be at least 1");
  GroupStore group(store, job);
  SG_ASSIGN_OR_RETURN(std::vector<GroupCommit> groups, group.Groups());
  GroupGcResult result;
  // `keep` group snapshots the trainers can resume from: a suspect one
  // (agent/group_suspect.h) is kept while it is newer than those, and never
  // counted among them.
  SG_ASSIGN_OR_RETURN(std::set<uint64_t> suspect, GroupSuspects(store, job));
  size_t first_kept = groups.size();
  for (int good = 0; first_kept > 0 && good < keep;) {
    --first_kept;
    if (!suspect.contains(groups[first_kept].seq)) ++good;
  }
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
  // A part goes when no kept group snapshot names it and it can join no
  // later one: group snapshots only ever commit steps newer than the newest,
  // so a part of that step or older is done with.
  // (A plain int64_t and a flag: GCC 12 at -O2 takes an optional's value
  // read under its own has_value() check for uninitialized.)
  const bool any_group = !groups.empty();
  const int64_t newest_step = any_group ? groups.back().step : 0;
  std::set<std::pair<int, uint64_t>> referenced;
  for (size_t i = first_kept; i < groups.size(); ++i) {
    for (const PartRecord& p : groups[i].parts) referenced.insert({p.rank, p.seq});
  }
  for (int rank = 0; rank < ranks; ++rank) {
    const std::string part_job = PartJob(job, rank);
    if (any_group) {
      SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> objects,
                          ListAll(store, SnapshotsPrefix(part_job)));
      std::map<uint64_t, std::vector<std::string>> dirs;
      std::set<uint64_t> committed;
      for (const ObjectInfo& o : objects) {
        auto seq = SnapshotSeqOfKey(part_job, o.key);
        if (!seq) continue;
        dirs[*seq].push_back(o.key);
        if (o.key == ManifestKey(part_job, *seq)) committed.insert(*seq);
      }
      SnapshotCatalog catalog(store, part_job);
      for (const auto& [seq, keys] : dirs) {
        if (!committed.count(seq) || referenced.count({rank, seq})) continue;
        auto manifest = catalog.ReadManifest(seq);
        if (!manifest.ok() || !manifest->step || *manifest->step > newest_step) continue;
        SG_ASSIGN_OR_RETURN(uint64_t n, DeleteSnapshot(store, part_job, seq, keys));
        if (n > 0) ++result.parts_deleted;
      }
    }
    // Parts whose writer died before their commit, and unfinished uploads;
    // committed parts are never taken here (keep is unbounded).
    GcOptions abandoned{.keep = 1 << 30, .abandoned_after = abandoned_after};
    SG_ASSIGN_OR_RETURN(GcResult r, CollectGarbage(store, clock, part_job, abandoned));
    result.abandoned += static_cast<int>(r.abandoned.size()) + r.stale_writes;
  }
  // The records of rounds before the oldest kept group snapshot's round.
  if (first_kept < groups.size()) {
    const uint64_t oldest_round = groups[first_kept].round;
    SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> records,
                        ListAll(store, JobPrefix(job) + "group/rounds/"));
    std::set<uint64_t> rounds;
    for (const ObjectInfo& o : records) {
      const std::string rest = o.key.substr(JobPrefix(job).size() + std::string("group/rounds/").size());
      auto round = ParseSeqName(std::string_view(rest).substr(0, 10));
      if (!round || *round >= oldest_round) continue;
      SG_RETURN_IF_ERROR(store.Delete(o.key));
      rounds.insert(*round);
    }
    result.rounds_deleted = rounds.size();
  }
  if (!result.deleted.empty() || result.parts_deleted > 0) {
    LogInfo("gc of job {}: removed {} old group snapshots, {} parts and the records of {} rounds",
            job, result.deleted.size(), result.parts_deleted, result.rounds_deleted);
  }
  return result;
}

std::optional<std::string> GroupSnapshotsHint(ObjectStore& store, const std::string& job,
                                              std::string_view to) {
  auto groups = GroupStore(store, job).Groups();
  if (!groups.ok() || groups->empty()) return std::nullopt;
  const int nodes = groups->back().nodes;
  return Format("job {} has {} group snapshot{} (nodes: {}); add --nodes {} {}", job,
                groups->size(), groups->size() == 1 ? "" : "s", nodes, nodes, to);
}

int RunGroupLs(const Config& config, ObjectStore& store, bool json) {
  auto groups = GroupStore(store, config.job).Groups();
  if (!groups.ok()) return FailGroupCommand("ls", groups.status());
  // SUSPECT: the trainers could not resume from it (agent/group_suspect.h);
  // last, so the columns before it keep their places.
  auto suspect = GroupSuspects(store, config.job);
  if (!suspect.ok()) return FailGroupCommand("ls", suspect.status());
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  if (!json) {
    std::printf("%-10s  %-24s  %5s  %10s  %10s  %-10s  %5s  %s\n", "SEQ", "CREATED", "NODES",
                "SIZE", "STORED", "STEP", "ROUND", "SUSPECT");
  }
  // Newest first, as `ls` of a single node shows them.
  for (auto it = groups->rbegin(); it != groups->rend(); ++it) {
    const GroupCommit& g = *it;
    if (json) {
      nlohmann::ordered_json parts = nlohmann::ordered_json::array();
      for (const PartRecord& p : g.parts) {
        parts.push_back({{"rank", p.rank},
                         {"seq", p.seq},
                         {"instance", p.instance},
                         {"size", p.bytes},
                         {"stored_size", p.stored}});
      }
      rows.push_back({{"seq", g.seq},
                      {"created", g.created},
                      {"nodes", g.nodes},
                      {"size", g.Bytes()},
                      {"stored_size", g.Stored()},
                      {"step", g.step},
                      {"round", g.round},
                      {"suspect", suspect->contains(g.seq)},
                      {"parts", std::move(parts)}});
    } else {
      std::printf("%-10s  %-24s  %5d  %10s  %10s  %-10lld  %5llu  %s\n", SeqName(g.seq).c_str(),
                  g.created.c_str(), g.nodes, HumanBytes(g.Bytes()).c_str(),
                  HumanBytes(g.Stored()).c_str(), static_cast<long long>(g.step),
                  static_cast<unsigned long long>(g.round),
                  suspect->contains(g.seq) ? "yes" : "-");
    }
  }
  if (json) std::cout << rows.dump(2) << "\n";
  return kExitOk;
}

int RunGroupVerify(const Config& config, ObjectStore& store, std::optional<uint64_t> seq) {
  auto listing = GroupStore(store, config.job).ListGroups();
  if (!listing.ok()) return FailGroupCommand("verify", listing.status());
  const std::vector<GroupCommit>* groups = &listing->groups;
  // Damaged group snapshot records are named; the newest readable one is
  // still checked.
  std::vector<std::string> unreadable;
  for (const UnreadableRecord& u : listing->unreadable) {
    unreadable.push_back("cannot read " + u.key + ": " + u.why);
  }
  std::optional<GroupCommit> g = FindGroup(*groups, seq);
  if (!g && !unreadable.empty()) {
    return FailGroupCommand("verify", Status::Corruption(Join(unreadable, "; ")));
  }
  if (!g) {
    return FailGroupCommand(
        "verify",
        Status::NotFound(seq ? "job " + config.job + " has no group snapshot " + SeqName(*seq)
                             : "the store has no group snapshot of job " + config.job),
        kExitNothingToRestore);
  }
  uint64_t files = 0, bytes = 0;
  std::vector<std::string> bad;  // of the group snapshot checked
  for (const PartRecord& p : g->parts) {
    const std::string part_job = PartJob(config.job, p.rank);
    auto manifest = SnapshotCatalog(store, part_job).ReadManifest(p.seq);
    Status st = manifest.status();
    if (st.ok()) {
      ProgressLine progress("verify rank " + std::to_string(p.rank), manifest->TotalSize());
      st = SnapshotFileReader(store, part_job)
               .Verify(*manifest, [&](uint64_t done) { progress.Update(done); });
      files += manifest->files.size();
      bytes += manifest->TotalSize();
    }
    if (!st.ok()) bad.push_back("rank " + std::to_string(p.rank) + ": " + st.message());
  }
  if (!bad.empty()) {
    std::vector<std::string> all = bad;
    all.insert(all.end(), unreadable.begin(), unreadable.end());
    return FailGroupCommand("verify", Status::Corruption("group snapshot " + SeqName(g->seq) +
                                                         " is damaged: " + Join(all, "; ")));
  }
  // The snapshot checked is whole; records elsewhere that cannot be read
  // are named apart, and still fail the command.
  std::cout << "group snapshot " << SeqName(g->seq) << ": " << g->nodes << " nodes, " << files
            << " files, " << HumanBytes(bytes) << ", every checksum matches\n";
  if (!unreadable.empty()) {
    return FailGroupCommand("verify",
                            Status::Corruption("other group records are damaged: " +
                                               Join(unreadable, "; ")));
  }
  return kExitOk;
}

StatusOr<nlohmann::ordered_json> GroupStatusJson(const Config& config, ObjectStore& store) {
  GroupStore group(store, config.job);
  SG_ASSIGN_OR_RETURN(PlanListing plans, group.Plans());
  SG_ASSIGN_OR_RETURN(GroupListing listing, group.ListGroups());
  SG_ASSIGN_OR_RETURN(std::optional<FailureRecord> failed, group.Failed());
  const std::optional<RoundPlan>& plan = plans.newest;
  const std::vector<GroupCommit>& groups = listing.groups;
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed,
                      ListAll(store, JobPrefix(config.job) + "group/members/"));
  SG_ASSIGN_OR_RETURN(auto members, group.Members());
  // Freshness from the store's own times: a record not rewritten within
  // group.timeout is stale.
  const auto now = std::chrono::system_clock::now();
  std::map<std::string, double> age;  // by agent
  for (const ObjectInfo& o : listed) {
    for (const auto& [agent, entry] : members) {
      if (group.MemberKey(agent) == o.key) {
        age[agent] = std::chrono::duration<double>(now - o.modified).count();
      }
    }
  }
  const double timeout = std::chrono::duration<double>(config.group.timeout).count();
  std::vector<RoundEnd> ends;
  if (plan) {
    auto e = group.Ends(plan->round);
    if (e.ok()) ends = *e;
  }
  auto complete = store.Head(CompleteKey(config.job));
  nlohmann::ordered_json j;
  j["job"] = config.job;
  j["nodes"] = config.nodes;
  j["complete"] = complete.ok();
  j["round"] = plan ? nlohmann::ordered_json(plan->round) : nlohmann::ordered_json();
  j["round_ended"] = ends.empty() ? nlohmann::ordered_json()
                                  : nlohmann::ordered_json({{"reason", ends.front().reason},
                                                            {"by", ends.front().by},
                                                            {"detail", ends.front().detail}});
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  nlohmann::ordered_json missing = nlohmann::ordered_json::array();
  std::set<std::string> in_plan;
  if (plan) {
    for (size_t r = 0; r < plan->members.size(); ++r) {
      const PlanMember& m = plan->members[r];
      in_plan.insert(m.agent);
      const bool known = age.count(m.agent) > 0;
      const bool fresh = known && age[m.agent] < timeout;
      ranks.push_back({{"rank", r},
                       {"instance", m.instance},
                       {"address", m.address},
                       {"age_seconds", known ? nlohmann::ordered_json(age[m.agent])
                                             : nlohmann::ordered_json()},
                       {"fresh", fresh}});
      if (!fresh) missing.push_back({{"rank", r}, {"instance", m.instance}});
    }
  }
  j["ranks"] = std::move(ranks);
  j["missing"] = std::move(missing);
  nlohmann::ordered_json waiting = nlohmann::ordered_json::array();
  for (const auto& [agent, entry] : members) {
    if (in_plan.count(agent)) continue;
    waiting.push_back({{"instance", entry.second.instance},
                       {"age_seconds", age.count(agent) ? age[agent] : -1.0}});
  }
  j["waiting"] = std::move(waiting);
  if (!groups.empty()) {
    const GroupCommit& g = groups.back();
    j["newest_group_snapshot"] = {{"seq", g.seq}, {"step", g.step}, {"created", g.created},
                                  {"size", g.Bytes()}, {"stored_size", g.Stored()}};
  } else {
    j["newest_group_snapshot"] = nullptr;
  }
  // Records skipped for their content: they hold back nothing, but they are damage.
  nlohmann::ordered_json unreadable = nlohmann::ordered_json::array();
  for (const auto* list : {&plans.unreadable, &listing.unreadable}) {
    for (const UnreadableRecord& u : *list) unreadable.push_back({{"key", u.key}, {"why", u.why}});
  }
  j["unreadable"] = std::move(unreadable);
  // Group snapshots the trainers could not resume from (agent/group_suspect.h).
  SG_ASSIGN_OR_RETURN(std::set<uint64_t> suspect, GroupSuspects(store, config.job));
  j["suspect"] = suspect;
  j["failed"] = failed ? nlohmann::ordered_json({{"why", failed->why},
                                                 {"time", failed->time},
                                                 {"round", failed->round},
                                                 {"how_to_go_on", kHowToGoOn}})
                       : nlohmann::ordered_json();
  return j;
}

std::string GroupStatusText(const nlohmann::ordered_json& j) {
  std::string out = "job " + j["job"].get<std::string>() + ": " +
                    std::to_string(j["nodes"].get<int>()) + " nodes" +
                    (j["complete"].get<bool>() ? ", complete" : "") + "\n";
  if (j.contains("failed") && !j["failed"].is_null()) {
    const auto& f = j["failed"];
    out += "FAILED" + (f["time"].get<std::string>().empty() ? "" : " at " + f["time"].get<std::string>()) +
           ": " + f["why"].get<std::string>() + "\n  every node exits 1 until it is cleared: " +
           f["how_to_go_on"].get<std::string>() + "\n";
  }
  if (!j["round"].is_null()) {
    out += "round " + std::to_string(j["round"].get<uint64_t>()) +
           (j["round_ended"].is_null()
                ? std::string(" running")
                : " ended: " + j["round_ended"]["reason"].get<std::string>() + " on " +
                      j["round_ended"]["by"].get<std::string>()) +
           "\n";
    for (const auto& r : j["ranks"]) {
      out += "  rank " + std::to_string(r["rank"].get<int>()) + "  " +
             r["instance"].get<std::string>() + "  " + r["address"].get<std::string>() + "  " +
             (r["age_seconds"].is_null()
                  ? std::string("gone")
                  : Format("seen {:.0f} s ago", r["age_seconds"].get<double>())) +
             (r["fresh"].get<bool>() ? "" : "  MISSING") + "\n";
    }
  } else {
    out += "no round yet\n";
  }
  for (const auto& w : j["waiting"]) out += "  waiting: " + w["instance"].get<std::string>() + "\n";
  if (!j["newest_group_snapshot"].is_null()) {
    const auto& g = j["newest_group_snapshot"];
    out += "newest group snapshot " + SeqName(g["seq"].get<uint64_t>()) + ": step " +
           std::to_string(g["step"].get<int64_t>()) + ", " + HumanBytes(g["size"].get<uint64_t>()) +
           " (" + HumanBytes(g["stored_size"].get<uint64_t>()) + " stored), " +
           g["created"].get<std::string>() + "\n";
  } else {
    out += "no group snapshot yet\n";
  }
  if (j.contains("suspect")) {
    for (const auto& seq : j["suspect"]) {
      out += "suspect: group snapshot " + SeqName(seq.get<uint64_t>()) +
             ", which the trainers could not resume from (spotguard unsuspect " +
             std::to_string(seq.get<uint64_t>()) + " clears the mark)\n";
    }
  }
  if (j.contains("unreadable")) {
    for (const auto& u : j["unreadable"]) {
      out += "problem: skipped unreadable record " + u["key"].get<std::string>() + ": " +
             u["why"].get<std::string>() + "\n";
    }
  }
  return out;
}

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
  auto groups = GroupStore(store, config.job).Groups();
  if (!groups.ok()) return FailGroupCommand("restore", groups.status());
  std::optional<GroupCommit> g = FindGroup(*groups, seq);
  if (!g) {
    return FailGroupCommand(
        "restore",
        Status::NotFound(seq ? "job " + config.job + " has no group snapshot " + SeqName(*seq)
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
    return FailGroupCommand("restore", result.status(),
                            IsRestoreRefusal(result.status()) ? kExitUsage : kExitFailure);
  }
  LogInfo("restored rank {}'s part of group snapshot {} (step {}) into {}", *rank,
          SeqName(g->seq), g->step, result->dir);
  std::cout << result->resume_path << "\n";
  return kExitOk;
}

}  // namespace sg
