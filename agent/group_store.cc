#include "agent/group_store.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "agent/store_layout.h"
#include "common/log.h"

namespace sg {
namespace {

constexpr std::string_view kJson = ".json";

std::string StepName(int64_t step) {
  // Twenty digits after an offset of 2^63, so that name order is step order
  // also for a negative step.
  char buf[32];
  std::snprintf(buf, sizeof buf, "%020llu",
                static_cast<unsigned long long>(static_cast<uint64_t>(step) + (1ull << 63)));
  return buf;
}

// The name after `prefix` without ".json"; "" when `key` is not such a name.
std::string NameOf(const std::string& key, const std::string& prefix) {
  if (!key.starts_with(prefix) || !key.ends_with(kJson)) return "";
  std::string name = key.substr(prefix.size(), key.size() - prefix.size() - kJson.size());
  return name.find('/') == std::string::npos ? name : "";
}

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

}  // namespace

template <typename T, typename Parse>
StatusOr<std::optional<T>> GroupStore::ReadOnce(std::map<std::string, T>& cache,
                                                const std::string& key, Parse parse) {
  if (auto it = cache.find(key); it != cache.end()) return std::optional<T>(it->second);
  auto body = store_.Get(key);
  if (body.status().Is(StatusCode::kNotFound)) return std::optional<T>();  // gone meanwhile
  SG_RETURN_IF_ERROR(body.status());
  StatusOr<T> parsed = parse(*body, key);
  if (!parsed.ok()) return parsed.status();
  cache[key] = *parsed;
  return std::optional<T>(std::move(*parsed));
}

std::string GroupStore::MemberKey(const std::string& agent) const {
  return JobPrefix(job_) + "group/members/" + agent + std::string(kJson);
}

std::string GroupStore::RoundPrefix(uint64_t round) const {
  return JobPrefix(job_) + "group/rounds/" + SeqName(round) + "/";
}

std::string GroupStore::GroupKey(uint64_t seq) const {
  return JobPrefix(job_) + "groups/" + SeqName(seq) + std::string(kJson);
}

Status GroupStore::WriteMember(const MemberRecord& m) {
  return store_.Put(MemberKey(m.agent), MemberToJson(m), PutCondition::None()).status();
}

Status GroupStore::RemoveMember(const std::string& agent) { return store_.Delete(MemberKey(agent)); }

StatusOr<std::map<std::string, std::pair<std::string, MemberRecord>>> GroupStore::Members() {
  const std::string prefix = JobPrefix(job_) + "group/members/";
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListAll(store_, prefix));
  std::map<std::string, std::pair<std::string, MemberRecord>> out;
  std::map<std::string, MemberRecord> still;
  for (const ObjectInfo& o : listed) {
    if (NameOf(o.key, prefix).empty()) continue;
    auto m = ReadOnce(members_, o.key, ParseMember);
    if (!m.ok()) {
      if (!m.status().Is(StatusCode::kCorruption)) return m.status();
      LogWarn("skipping a member record: {}", m.status().message());
      continue;
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
                  .Put(JobPrefix(job_) + "group/refused/" + agent + std::string(kJson), j.dump(),
                       PutCondition::CreateOnly())
                  .status();
  return st.Is(StatusCode::kPreconditionFailed) ? Status::Ok() : st;
}

StatusOr<std::optional<std::string>> GroupStore::Refusal(const std::string& agent) {
  auto body = store_.Get(JobPrefix(job_) + "group/refused/" + agent + std::string(kJson));
  if (body.status().Is(StatusCode::kNotFound)) return std::optional<std::string>();
  SG_RETURN_IF_ERROR(body.status());
  nlohmann::json j = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("why") && j["why"].is_string()) {
    return std::optional<std::string>(j["why"].get<std::string>());
  }
  return std::optional<std::string>("(an unreadable refusal)");
}

Status GroupStore::MarkFailed(const std::string& why) {
  nlohmann::json j = {{"why", why}};
  Status st = store_.Put(JobPrefix(job_) + "group/failed.json", j.dump(), PutCondition::CreateOnly())
                  .status();
  return st.Is(StatusCode::kPreconditionFailed) ? Status::Ok() : st;
}

StatusOr<std::optional<std::string>> GroupStore::Failed() {
  auto body = store_.Get(JobPrefix(job_) + "group/failed.json");
  if (body.status().Is(StatusCode::kNotFound)) return std::optional<std::string>();
  SG_RETURN_IF_ERROR(body.status());
  nlohmann::json j = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("why") && j["why"].is_string()) {
    return std::optional<std::string>(j["why"].get<std::string>());
  }
  return std::optional<std::string>("(an unreadable failure record)");
}

StatusOr<std::optional<RoundPlan>> GroupStore::NewestPlan() {
  const std::string prefix = JobPrefix(job_) + "group/rounds/";
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListAll(store_, prefix));
  // Newest first: a round without a readable plan is passed over.
  std::vector<uint64_t> rounds;
  for (const ObjectInfo& o : listed) {
    std::string_view rest = std::string_view(o.key).substr(prefix.size());
    if (rest.size() != 10 + std::string_view("/plan.json").size() || !rest.ends_with("/plan.json"))
      continue;
    if (auto r = ParseSeqName(rest.substr(0, 10))) rounds.push_back(*r);
  }
  std::sort(rounds.rbegin(), rounds.rend());
  for (uint64_t r : rounds) {
    const std::string key = RoundPrefix(r) + "plan.json";
    auto body = store_.Get(key);
    SG_RETURN_IF_ERROR(body.status());
    auto plan = ParsePlan(*body, key);
    if (plan.ok() && plan->round == r) return std::optional<RoundPlan>(std::move(*plan));
    LogWarn("skipping the plan of round {}: {}", r,
            plan.ok() ? "it names another round" : plan.status().message());
  }
  return std::optional<RoundPlan>();
}

Status GroupStore::WritePlan(const RoundPlan& p) {
  return store_.Put(RoundPrefix(p.round) + "plan.json", PlanToJson(p), PutCondition::CreateOnly())
      .status();
}

Status GroupStore::EndRound(uint64_t round, const RoundEnd& end) {
  Status st = store_
                  .Put(RoundPrefix(round) + "end/" + end.by + std::string(kJson),
                       RoundEndToJson(end), PutCondition::CreateOnly())
                  .status();
  return st.Is(StatusCode::kPreconditionFailed) ? Status::Ok() : st;
}

StatusOr<std::vector<RoundEnd>> GroupStore::Ends(uint64_t round) {
  const std::string prefix = RoundPrefix(round) + "end/";
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListAll(store_, prefix));
  Forget(ends_, "", listed);
  std::vector<RoundEnd> out;
  for (const ObjectInfo& o : listed) {
    auto e = ReadOnce(ends_, o.key, ParseRoundEnd);
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
  const std::string key = RoundPrefix(round) + "parts/" + StepName(part.step) + "-" +
                          std::to_string(part.rank) + "-" + SeqName(part.seq) + std::string(kJson);
  return store_.Put(key, PartToJson(part), PutCondition::CreateOnly()).status();
}

StatusOr<std::vector<PartRecord>> GroupStore::Parts(uint64_t round) {
  const std::string prefix = RoundPrefix(round) + "parts/";
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListAll(store_, prefix));
  // Only the round looked at is kept: parts of earlier rounds are not read again.
  Forget(parts_, "", listed);
  std::vector<PartRecord> out;
  for (const ObjectInfo& o : listed) {
    auto p = ReadOnce(parts_, o.key, ParsePart);
    if (!p.ok()) {
      if (!p.status().Is(StatusCode::kCorruption)) return p.status();
      LogWarn("skipping a part record: {}", p.status().message());
      continue;
    }
    if (*p) out.push_back(**p);
  }
  return out;
}

namespace {

// {"rank", "step"} records, one per rank, under `prefix` (create-only).
Status PutRankStep(ObjectStore& store, const std::string& prefix, int rank,
                   std::optional<int64_t> step) {
  nlohmann::json j;
  j["rank"] = rank;
  j["step"] = step ? nlohmann::json(*step) : nlohmann::json(nullptr);
  Status st = store.Put(prefix + std::to_string(rank) + std::string(kJson), j.dump(),
                        PutCondition::CreateOnly())
                  .status();
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
  return PutRankStep(store_, RoundPrefix(round) + "done/", rank, step);
}

StatusOr<std::map<int, std::optional<int64_t>>> GroupStore::Done(uint64_t round) {
  return RankSteps(store_, RoundPrefix(round) + "done/");
}

Status GroupStore::MarkAsked(uint64_t round, int rank, std::optional<int64_t> after) {
  return PutRankStep(store_, RoundPrefix(round) + "asked/", rank, after);
}

StatusOr<std::map<int, std::optional<int64_t>>> GroupStore::Asked(uint64_t round) {
  return RankSteps(store_, RoundPrefix(round) + "asked/");
}

Status GroupStore::WriteFinal(uint64_t round, uint64_t seq, int64_t step) {
  nlohmann::json j = {{"seq", seq}, {"step", step}};
  Status st = store_.Put(RoundPrefix(round) + "final.json", j.dump(), PutCondition::CreateOnly())
                  .status();
  return st.Is(StatusCode::kPreconditionFailed) ? Status::Ok() : st;
}

StatusOr<std::optional<uint64_t>> GroupStore::Final(uint64_t round) {
  auto body = store_.Get(RoundPrefix(round) + "final.json");
  if (body.status().Is(StatusCode::kNotFound)) return std::optional<uint64_t>();
  SG_RETURN_IF_ERROR(body.status());
  nlohmann::json j = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("seq") || !j["seq"].is_number_unsigned()) {
    return Status::Corruption(RoundPrefix(round) + "final.json: no \"seq\"");
  }
  return std::optional<uint64_t>(j["seq"].get<uint64_t>());
}

Status GroupStore::CommitGroup(const GroupCommit& g) {
  return store_.Put(GroupKey(g.seq), GroupCommitToJson(g), PutCondition::CreateOnly()).status();
}

StatusOr<std::vector<GroupCommit>> GroupStore::Groups() {
  const std::string prefix = JobPrefix(job_) + "groups/";
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListAll(store_, prefix));
  Forget(groups_, prefix, listed);
  std::vector<GroupCommit> out;
  for (const ObjectInfo& o : listed) {
    const std::string name = NameOf(o.key, prefix);
    auto seq = ParseSeqName(name);
    if (!seq) continue;
    auto g = ReadOnce(groups_, o.key, ParseGroupCommit);
    if (!g.ok() && !g.status().Is(StatusCode::kCorruption)) return g.status();
    if (!g.ok() || (*g && (*g)->seq != *seq)) {
      LogWarn("skipping group snapshot {}: {}", name,
              g.ok() ? "it names another seq" : g.status().message());
      continue;
    }
    if (*g) out.push_back(std::move(**g));
  }
  std::sort(out.begin(), out.end(),
            [](const GroupCommit& a, const GroupCommit& b) { return a.seq < b.seq; });
  return out;
}

}  // namespace sg
