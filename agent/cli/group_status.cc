// `status` of a job of several nodes (agent/cli/group_status.h): the round, its
// ranks and their freshness, who waits, the newest group snapshot, suspect
// and unreadable records, quarantined objects, and a failed job's mark.
#include "agent/cli/group_status.h"

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/repo/group_quarantine.h"
#include "agent/repo/group_store.h"
#include "agent/repo/group_suspect.h"
#include "agent/repo/progress.h"
#include "agent/repo/repository.h"
#include "common/duration.h"
#include "common/strings.h"

namespace sg {
namespace {

constexpr const char* kHowToGoOn =
    "fix the trainer, then run `spotguard reset-failure` with the job's config; a node whose "
    "command or config differs from the failed one clears it on its own";

// Each member record's age, by agent, from the store's own times: a record
// not rewritten within group.timeout is stale.
template <typename Members>
StatusOr<std::map<std::string, double>> MemberAges(ObjectStore& store,
                                                   GroupStore& group, const Members& members) {
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed,
                      ListAll(store, group.MembersPrefix()));
  const auto now = std::chrono::system_clock::now();
  std::map<std::string, double> age;
  for (const ObjectInfo& o : listed) {
    for (const auto& [agent, entry] : members) {
      if (group.MemberKey(agent) == o.key) {
        age[agent] = std::chrono::duration<double>(now - o.modified).count();
      }
    }
  }
  return age;
}

// The damaged objects of the parts, relative to "<job>/", and those the
// newest group snapshot needs (agent/repo/group_quarantine.h).
Status AddQuarantined(ObjectStore& store, const std::string& job,
                      const std::vector<GroupCommit>& groups, nlohmann::ordered_json& j) {
  SG_ASSIGN_OR_RETURN(const GroupQuarantine quarantine, ReadGroupQuarantine(store, job, groups));
  j["quarantined"] = quarantine.AllKeys();
  if (!groups.empty()) {
    const auto needs = quarantine.needs.find(groups.back().seq);
    j["newest_group_snapshot"]["quarantined"] =
        needs == quarantine.needs.end() ? std::vector<std::string>{} : needs->second;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<nlohmann::ordered_json> GroupStatusJson(const Config& config, ObjectStore& store) {
  GroupStore group = Repository::Open(store, config.job).Group();
  SG_ASSIGN_OR_RETURN(PlanListing plans, group.Plans());
  SG_ASSIGN_OR_RETURN(GroupListing listing, group.ListGroups());
  SG_ASSIGN_OR_RETURN(std::optional<FailureRecord> failed, group.Failed());
  const std::optional<RoundPlan>& plan = plans.newest;
  const std::vector<GroupCommit>& groups = listing.groups;
  SG_ASSIGN_OR_RETURN(auto members, group.Members());
  SG_ASSIGN_OR_RETURN(auto age, MemberAges(store, group, members));
  const double timeout = std::chrono::duration<double>(config.group.timeout).count();
  std::vector<RoundEnd> ends;
  if (plan) {
    auto e = group.Ends(plan->round);
    if (e.ok()) ends = *e;
  }
  auto complete = Repository::Open(store, config.job).IsComplete();
  nlohmann::ordered_json j;
  j["job"] = config.job;
  j["nodes"] = config.nodes;
  j["complete"] = complete.ok() && *complete;
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
  // Group snapshots the trainers could not resume from (agent/repo/group_suspect.h).
  SG_ASSIGN_OR_RETURN(std::set<uint64_t> suspect, GroupSuspects(store, config.job));
  j["suspect"] = suspect;
  SG_RETURN_IF_ERROR(AddQuarantined(store, config.job, groups, j));
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
  if (j.contains("quarantined") && !j["quarantined"].empty()) {
    std::vector<std::string> keys;
    for (const auto& key : j["quarantined"]) keys.push_back(key.get<std::string>());
    const auto& g = j["newest_group_snapshot"];
    const size_t needed = g.is_null() || !g.contains("quarantined") ? 0 : g["quarantined"].size();
    out += "quarantined: " + Join(keys, ", ") +
           ": found damaged; no round resumes from a group snapshot that needs one, and new "
           "parts store their frames afresh" +
           (needed > 0 ? " (the newest group snapshot needs " + std::to_string(needed) + ")" : "") +
           "\n";
  }
  if (j.contains("unreadable")) {
    for (const auto& u : j["unreadable"]) {
      out += "problem: skipped unreadable record " + u["key"].get<std::string>() + ": " +
             u["why"].get<std::string>() + "\n";
    }
  }
  return out;
}

}  // namespace sg
