#include "agent/repo/group_store.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <mutex>
#include <set>

#include "agent/repo/store_layout.h"
#include "common/log.h"

namespace sg {
namespace {

// Forgets what `cache` holds under `prefix` that `listed` no longer has.
template <typename T>
void Forget(std::map<std::string, T>& cache, const std::string& prefix,
            const std::vector<ObjectInfo>& listed) {
  std::set<std::string> keep;
  for (const ObjectInfo& o : listed) keep.insert(o.key);
  for (auto it = cache.lower_bound(prefix); it != cache.end() && it->first.starts_with(prefix);) {
    it = keep.count(it->first) ? std::next(it) : cache.erase(it);
  }
}

// Whether this is the process's first sight of the unreadable record `key`
// as of `etag`: each is warned about once, however many GroupStore objects
// read it (retention makes one for every commit).
bool FirstSightOfUnreadable(const std::string& key, const std::string& etag) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  return seen.insert(key + '\n' + etag).second;
}

}  // namespace

template <typename T, typename Parse>
StatusOr<std::optional<T>> GroupStore::ReadOnce(std::map<std::string, T>& cache,
                                                const ObjectInfo& object, Parse parse) {
  const std::string& key = object.key;
  if (auto it = cache.find(key); it != cache.end()) return std::optional<T>(it->second);
  if (auto bad = unreadable_.find(key);
      bad != unreadable_.end() && bad->second.first == object.etag) {
    return Status::Corruption(bad->second.second);
  }
  auto body = store_.Get(key);
  if (body.status().Is(StatusCode::kNotFound)) return std::optional<T>();  // gone meanwhile
  SG_RETURN_IF_ERROR(body.status());
  StatusOr<T> parsed = parse(*body, key);
  if (!parsed.ok()) {
    if (parsed.status().Is(StatusCode::kCorruption)) {
      if (FirstSightOfUnreadable(key, object.etag)) {
        LogWarn("skipping {}: {}", key, parsed.status().message());
      }
      unreadable_[key] = {object.etag, parsed.status().message()};
    }
    return parsed.status();
  }
  unreadable_.erase(key);
  cache[key] = *parsed;
  return std::optional<T>(std::move(*parsed));
}

std::string GroupStore::MembersPrefix() const { return GroupMembersPrefix(job_); }

std::string GroupStore::MemberKey(const std::string& agent) const {
  return GroupMemberKey(job_, agent);
}

std::string GroupStore::RoundPrefix(uint64_t round) const { return GroupRoundPrefix(job_, round); }

std::string GroupStore::GroupKey(uint64_t seq) const { return sg::GroupKey(job_, seq); }

Status GroupStore::WriteMember(const MemberRecord& m) {
  return store_.Put(MemberKey(m.agent), MemberToJson(m), PutCondition::None()).status();
}

Status GroupStore::RemoveMember(const std::string& agent) { return store_.Delete(MemberKey(agent)); }

StatusOr<std::map<std::string, std::pair<std::string, MemberRecord>>> GroupStore::Members() {
  const std::string prefix = MembersPrefix();
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListAll(store_, prefix));
  Forget(unreadable_, prefix, listed);
  std::map<std::string, std::pair<std::string, MemberRecord>> out;
  std::map<std::string, MemberRecord> still;
  for (const ObjectInfo& o : listed) {
    if (RecordNameOf(o.key, prefix).empty()) continue;
    auto m = ReadOnce(members_, o, ParseMember);
    if (!m.ok()) {
      if (!m.status().Is(StatusCode::kCorruption)) return m.status();
      continue;  // warned about once by ReadOnce
    }
    if (!*m) continue;
    still[o.key] = **m;
    std::string agent = (*m)->agent;
    out[agent] = {o.etag, std::move(**m)};
  }
  members_ = std::move(still);  // records that are gone are forgotten
  return out;
}

Status GroupStore::Refuse(const std::string& agent, const std::string& why) {
  nlohmann::json j = {{"agent", agent}, {"why", why}};
  Status st = store_
                  .Put(GroupRefusalKey(job_, agent), j.dump(),
                       PutCondition::CreateOnly())
                  .status();
  return st.Is(StatusCode::kPreconditionFailed) ? Status::Ok() : st;
}

StatusOr<std::optional<std::string>> GroupStore::Refusal(const std::string& agent) {
  auto body = store_.Get(GroupRefusalKey(job_, agent));
  if (body.status().Is(StatusCode::kNotFound)) return std::optional<std::string>();
  SG_RETURN_IF_ERROR(body.status());
  nlohmann::json j = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("why") && j["why"].is_string()) {
    return std::optional<std::string>(j["why"].get<std::string>());
  }
  return std::optional<std::string>("(an unreadable refusal)");
}

std::string GroupStore::FailureKey() const { return GroupFailureKey(job_); }

Status GroupStore::MarkFailed(const FailureRecord& failure) {
  nlohmann::ordered_json j = {{"why", failure.why},
                              {"time", failure.time},
                              {"round", failure.round},
                              {"settings", failure.settings}};
  Status st = store_.Put(FailureKey(), j.dump(), PutCondition::CreateOnly()).status();
  return st.Is(StatusCode::kPreconditionFailed) ? Status::Ok() : st;
}

StatusOr<std::optional<FailureRecord>> GroupStore::Failed() {
  auto body = store_.Get(FailureKey());
  if (body.status().Is(StatusCode::kNotFound)) return std::optional<FailureRecord>();
  SG_RETURN_IF_ERROR(body.status());
  nlohmann::json j = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  FailureRecord f;
  f.why = "(an unreadable failure record)";
  if (!j.is_object()) return std::optional<FailureRecord>(std::move(f));
  auto text = [&](const char* name) {
    return j.contains(name) && j[name].is_string() ? j[name].get<std::string>() : std::string();
  };
  if (j.contains("why") && j["why"].is_string()) f.why = text("why");
  f.time = text("time");
  f.settings = text("settings");
  if (j.contains("round") && j["round"].is_number_unsigned()) f.round = j["round"].get<uint64_t>();
  return std::optional<FailureRecord>(std::move(f));
}

Status GroupStore::ClearFailure() {
  Status st = store_.Delete(FailureKey());
  return st.Is(StatusCode::kNotFound) ? Status::Ok() : st;
}

StatusOr<std::optional<RoundPlan>> GroupStore::NewestPlan() {
  SG_ASSIGN_OR_RETURN(PlanListing plans, Plans());
  return std::move(plans.newest);
}

StatusOr<PlanListing> GroupStore::Plans() {
  const std::string prefix = GroupRoundsPrefix(job_);
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListAll(store_, prefix));
  // round -> its plan's listing; the numbers come from the keys alone.
  std::map<uint64_t, ObjectInfo, std::greater<>> rounds;
  for (const ObjectInfo& o : listed) {
    if (auto r = RoundOfPlanKey(job_, o.key)) rounds.emplace(*r, o);
  }
  Forget(plans_, prefix, listed);
  Forget(unreadable_, prefix, listed);
  PlanListing out;
  if (!rounds.empty()) out.newest_round = rounds.begin()->first;
  // Newest first: a round without a readable plan is passed over.
  for (const auto& [r, o] : rounds) {
    auto plan = ReadOnce(plans_, o, [r = r](std::string_view text, const std::string& key) {
      auto p = ParsePlan(text, key);
      if (p.ok() && p->round != r) {
        return StatusOr<RoundPlan>(
            Status::Corruption(key + ": it names round " + std::to_string(p->round)));
      }
      return p;
    });
    if (plan.ok() && *plan) {
      out.newest = std::move(**plan);
      break;
    }
    if (!plan.ok() && !plan.status().Is(StatusCode::kCorruption)) return plan.status();
    if (!plan.ok()) out.unreadable.push_back({o.key, plan.status().message()});
  }
  return out;
}

Status GroupStore::WritePlan(const RoundPlan& p) {
  return store_.Put(GroupPlanKey(job_, p.round), PlanToJson(p), PutCondition::CreateOnly())
      .status();
}

Status GroupStore::EndRound(uint64_t round, const RoundEnd& end) {
  Status st = store_
                  .Put(RoundEndKey(job_, round, end.by),
                       RoundEndToJson(end), PutCondition::CreateOnly())
                  .status();
  return st.Is(StatusCode::kPreconditionFailed) ? Status::Ok() : st;
}

StatusOr<std::vector<RoundEnd>> GroupStore::Ends(uint64_t round) {
  const std::string prefix = RoundRecordsPrefix(job_, round, RoundRecords::kEnds);
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListAll(store_, prefix));
  Forget(ends_, "", listed);
  Forget(unreadable_, prefix, listed);
  std::vector<RoundEnd> out;
  for (const ObjectInfo& o : listed) {
    auto e = ReadOnce(ends_, o, ParseRoundEnd);
    if (!e.ok() && !e.status().Is(StatusCode::kCorruption)) return e.status();
    // An end that cannot be read still ends the round.
    if (!e.ok()) {
      out.push_back(RoundEnd{"unreadable", o.key, e.status().message()});
    } else if (*e) {
      out.push_back(**e);
    }
  }
  return out;
}

Status GroupStore::AnnouncePart(uint64_t round, const PartRecord& part) {
  const std::string key = RoundPartKey(job_, round, part.step, part.rank, part.seq);
  return store_.Put(key, PartToJson(part), PutCondition::CreateOnly()).status();
}

StatusOr<std::vector<PartRecord>> GroupStore::Parts(uint64_t round) {
  const std::string prefix = RoundRecordsPrefix(job_, round, RoundRecords::kParts);
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListAll(store_, prefix));
  // Only the round looked at is kept: parts of earlier rounds are not read again.
  Forget(parts_, "", listed);
  Forget(unreadable_, prefix, listed);
  std::vector<PartRecord> out;
  for (const ObjectInfo& o : listed) {
    auto p = ReadOnce(parts_, o, ParsePart);
    if (!p.ok()) {
      if (!p.status().Is(StatusCode::kCorruption)) return p.status();
      continue;  // warned about once by ReadOnce
    }
    if (*p) out.push_back(**p);
  }
  return out;
}

namespace {

// {"rank", "step"} records, one per rank (create-only).
Status PutRankStep(ObjectStore& store, const std::string& key, int rank,
                   std::optional<int64_t> step) {
  nlohmann::json j;
  j["rank"] = rank;
  j["step"] = step ? nlohmann::json(*step) : nlohmann::json(nullptr);
  Status st = store.Put(key, j.dump(), PutCondition::CreateOnly()).status();
  return st.Is(StatusCode::kPreconditionFailed) ? Status::Ok() : st;
}

StatusOr<std::map<int, std::optional<int64_t>>> RankSteps(ObjectStore& store,
                                                          const std::string& prefix) {
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListAll(store, prefix));
  std::map<int, std::optional<int64_t>> out;
  for (const ObjectInfo& o : listed) {
    auto body = store.Get(o.key);
    SG_RETURN_IF_ERROR(body.status());
    nlohmann::json j = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("rank") || !j["rank"].is_number_unsigned()) {
      LogWarn("skipping {}: not {{\"rank\", \"step\"}}", o.key);
      continue;
    }
    std::optional<int64_t> step;
    if (j.contains("step") && j["step"].is_number_integer()) step = j["step"].get<int64_t>();
    out[j["rank"].get<int>()] = step;
  }
  return out;
}

}  // namespace

Status GroupStore::MarkDone(uint64_t round, int rank, std::optional<int64_t> step) {
  return PutRankStep(store_, RoundRankKey(job_, round, RoundRecords::kDone, rank), rank, step);
}

StatusOr<std::map<int, std::optional<int64_t>>> GroupStore::Done(uint64_t round) {
  return RankSteps(store_, RoundRecordsPrefix(job_, round, RoundRecords::kDone));
}

Status GroupStore::MarkAsked(uint64_t round, int rank, std::optional<int64_t> after) {
  return PutRankStep(store_, RoundRankKey(job_, round, RoundRecords::kAsked, rank), rank, after);
}

StatusOr<std::map<int, std::optional<int64_t>>> GroupStore::Asked(uint64_t round) {
  return RankSteps(store_, RoundRecordsPrefix(job_, round, RoundRecords::kAsked));
}

Status GroupStore::MarkFlush(uint64_t round, int rank, std::optional<int64_t> step) {
  return PutRankStep(store_, RoundRankKey(job_, round, RoundRecords::kFlush, rank), rank, step);
}

StatusOr<std::map<int, std::optional<int64_t>>> GroupStore::Flushes(uint64_t round) {
  return RankSteps(store_, RoundRecordsPrefix(job_, round, RoundRecords::kFlush));
}

Status GroupStore::WriteFinal(uint64_t round, uint64_t seq, int64_t step) {
  nlohmann::json j = {{"seq", seq}, {"step", step}};
  Status st = store_.Put(GroupFinalKey(job_, round), j.dump(), PutCondition::CreateOnly())
                  .status();
  return st.Is(StatusCode::kPreconditionFailed) ? Status::Ok() : st;
}

StatusOr<std::optional<uint64_t>> GroupStore::Final(uint64_t round) {
  auto body = store_.Get(GroupFinalKey(job_, round));
  if (body.status().Is(StatusCode::kNotFound)) return std::optional<uint64_t>();
  SG_RETURN_IF_ERROR(body.status());
  nlohmann::json j = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("seq") || !j["seq"].is_number_unsigned()) {
    return Status::Corruption(GroupFinalKey(job_, round) + ": no \"seq\"");
  }
  return std::optional<uint64_t>(j["seq"].get<uint64_t>());
}

Status GroupStore::CommitGroup(const GroupCommit& g) {
  return store_.Put(GroupKey(g.seq), GroupCommitToJson(g), PutCondition::CreateOnly()).status();
}

StatusOr<std::vector<GroupCommit>> GroupStore::Groups() {
  SG_ASSIGN_OR_RETURN(GroupListing listing, ListGroups());
  return std::move(listing.groups);
}

StatusOr<GroupListing> GroupStore::ListGroups() {
  const std::string prefix = GroupsPrefix(job_);
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListAll(store_, prefix));
  Forget(groups_, prefix, listed);
  Forget(unreadable_, prefix, listed);
  GroupListing out;
  for (const ObjectInfo& o : listed) {
    auto seq = GroupSeqOfKey(job_, o.key);
    if (!seq) continue;
    // The seq is the key's, whatever the record holds: the next commit
    // goes above every key listed (a damaged record at the top must not
    // make every later commit fail its precondition).
    out.newest_seq = std::max(out.newest_seq, *seq);
    auto g = ReadOnce(groups_, o, [seq = *seq](std::string_view text, const std::string& key) {
      auto parsed = ParseGroupCommit(text, key);
      if (parsed.ok() && parsed->seq != seq) {
        return StatusOr<GroupCommit>(
            Status::Corruption(key + ": it names seq " + std::to_string(parsed->seq)));
      }
      return parsed;
    });
    if (!g.ok() && !g.status().Is(StatusCode::kCorruption)) return g.status();
    if (!g.ok()) {
      out.unreadable.push_back({o.key, g.status().message()});
    } else if (*g) {
      out.groups.push_back(std::move(**g));
    }
  }
  std::sort(out.groups.begin(), out.groups.end(),
            [](const GroupCommit& a, const GroupCommit& b) { return a.seq < b.seq; });
  return out;
}

}  // namespace sg
