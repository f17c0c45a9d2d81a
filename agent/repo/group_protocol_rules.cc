// The round protocol's rules (docs/design.md §14): a node's own member
// record and its digests, which members are fresh, who may coordinate, how
// the next round is planned, when a group of parts is complete, how a
// round ended, where the group resumes, and which checkpoint a rank uploads.
#include "agent/repo/group_protocol.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "agent/config/config.h"
#include "common/crypto.h"
#include "common/strings.h"

namespace sg {

using json = nlohmann::json;

MemberRecord OwnRecord(const Config& config, const std::string& instance,
                       const std::string& agent, const std::string& address) {
  MemberRecord m;
  m.instance = instance;
  m.agent = agent;
  m.address = address;
  m.job = config.job;
  m.nodes = config.nodes;
  m.command = RedactArgs(config.command);
  m.command_digest = CommandDigest(config.job, config.command);
  return m;
}

namespace {

// Slow enough to make guessing a weak password in a command costly, fast
// enough for an agent's start (tens of milliseconds).
constexpr int kDigestIterations = 100'000;

std::string SlowDigest(std::string_view kind, const std::string& job, const std::string& text) {
  // Remembered for the process, for one that digests the same text again
  // (the fake multi-node world starts dozens of agents in one process).
  static std::mutex mu;
  static std::map<std::string, std::string> known;
  const std::string salt = "spotguard " + std::string(kind) + " " + job;
  const std::string key = salt + '\0' + text;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  std::string digest = HexEncode(Pbkdf2Sha256(text, salt, kDigestIterations));
  std::lock_guard<std::mutex> lock(mu);
  if (known.size() < 64) known.emplace(key, digest);
  return digest;
}

}  // namespace

std::string CommandDigest(const std::string& job, const std::vector<std::string>& command) {
  return SlowDigest("command", job, json(command).dump());
}

std::string SettingsDigest(const Config& config) {
  json j = ConfigToJson(config, /*redact=*/false);
  // metrics_file is each node's own; prices only matter to `report`.
  for (const char* node_local : {"checkpoint_dir", "log_dir", "log_level", "log_format", "imds",
                                 "store", "endpoint", "region", "metrics_file", "prices"}) {
    j.erase(node_local);
  }
  j["group"].erase("address");
  return SlowDigest("settings", config.job, j.dump());
}

std::optional<std::string> ConfigDifference(const MemberRecord& member,
                                            const MemberRecord& coordinator) {
  const std::string there = " on the coordinator " + coordinator.instance;
  if (member.job != coordinator.job) {
    return "job: \"" + member.job + "\" here, \"" + coordinator.job + "\"" + there;
  }
  if (member.nodes != coordinator.nodes) {
    return "nodes: " + std::to_string(member.nodes) + " here, " +
           std::to_string(coordinator.nodes) + there;
  }
  if (member.command_digest != coordinator.command_digest) {
    // Both named as stored: with their secrets redacted.
    std::string diff = "command: [" + Join(member.command, " ") + "] here, [" +
                       Join(coordinator.command, " ") + "]" + there;
    if (member.command == coordinator.command) diff += " (they differ in a redacted argument)";
    return diff;
  }
  return std::nullopt;
}

void MemberFreshness::Observe(
    Clock::MonoTime now,
    const std::map<std::string, std::pair<std::string, MemberRecord>>& listed) {
  std::map<std::string, Seen> next;
  for (const auto& [instance, entry] : listed) {
    const auto& [etag, record] = entry;
    auto it = seen_.find(record.agent);
    if (it != seen_.end() && it->second.etag == etag) {
      next[record.agent] = it->second;  // unchanged since it was first seen so
    } else {
      next[record.agent] = Seen{etag, now, record};
    }
  }
  seen_ = std::move(next);  // a member whose record is gone is gone
}

bool MemberFreshness::Fresh(const std::string& agent, Clock::MonoTime now) const {
  auto it = seen_.find(agent);
  return it != seen_.end() && now - it->second.changed < timeout_;
}

std::vector<MemberRecord> MemberFreshness::FreshMembers(Clock::MonoTime now) const {
  std::vector<MemberRecord> out;
  for (const auto& [agent, s] : seen_) {
    if (Fresh(agent, now)) out.push_back(s.record);
  }
  return out;
}

std::optional<double> MemberFreshness::Age(const std::string& agent, Clock::MonoTime now) const {
  auto it = seen_.find(agent);
  if (it == seen_.end()) return std::nullopt;
  return std::chrono::duration<double>(now - it->second.changed).count();
}

bool MayCoordinate(const MemberRecord& self, const std::optional<RoundPlan>& newest,
                   const std::vector<MemberRecord>& fresh) {
  if (!newest || newest->RankOf(self.agent)) return true;
  return std::none_of(fresh.begin(), fresh.end(), [&](const MemberRecord& m) {
    return m.agent != self.agent && newest->RankOf(m.agent).has_value();
  });
}

std::optional<RoundPlan> PlanNextRound(const MemberRecord& coordinator,
                                       const std::vector<MemberRecord>& fresh, int nodes,
                                       const std::optional<RoundPlan>& previous, uint64_t round,
                                       uint64_t generation, int port,
                                       std::optional<uint64_t> resume_seq,
                                       std::optional<int64_t> resume_step) {
  // Members that may take part: fresh, sharing the coordinator's settings.
  std::vector<const MemberRecord*> others;
  for (const MemberRecord& m : fresh) {
    if (m.agent == coordinator.agent) continue;
    if (ConfigDifference(m, coordinator)) continue;  // refused; it says why itself
    others.push_back(&m);
  }
  auto previous_rank = [&](const MemberRecord* m) {
    if (previous) {
      if (auto r = previous->RankOf(m->agent)) return *r;
    }
    return nodes;  // newcomers after every member of the last round
  };
  std::sort(others.begin(), others.end(), [&](const MemberRecord* a, const MemberRecord* b) {
    const int ra = previous_rank(a), rb = previous_rank(b);
    if (ra != rb) return ra < rb;
    return a->instance != b->instance ? a->instance < b->instance : a->agent < b->agent;
  });
  if (static_cast<int>(others.size()) + 1 < nodes) return std::nullopt;
  RoundPlan p;
  p.round = round;
  p.nodes = nodes;
  p.generation = generation;
  p.port = port;
  p.resume_seq = resume_seq;
  p.resume_step = resume_step;
  // The coordinator is rank 0 (the launcher's master). A member of the last
  // round keeps its rank when it is free, so a survivor restores its own
  // part (mostly on its disk already); the others fill the free ranks in the
  // order above.
  std::vector<const MemberRecord*> slots(static_cast<size_t>(nodes), nullptr);
  slots[0] = &coordinator;
  std::vector<const MemberRecord*> rest;
  for (const MemberRecord* m : others) {
    const int r = previous_rank(m);
    if (r > 0 && r < nodes && slots[static_cast<size_t>(r)] == nullptr) {
      slots[static_cast<size_t>(r)] = m;
    } else {
      rest.push_back(m);
    }
  }
  auto next = rest.begin();
  for (const MemberRecord*& slot : slots) {
    if (slot == nullptr) slot = *next++;
  }
  for (const MemberRecord* m : slots) p.members.push_back({m->instance, m->agent, m->address});
  return p;
}

std::optional<std::vector<PartRecord>> CompleteGroup(const std::vector<PartRecord>& parts,
                                                     int nodes,
                                                     std::optional<int64_t> committed_step) {
  // step -> rank -> the newest part
  std::map<int64_t, std::map<int, PartRecord>, std::greater<>> by_step;
  for (const PartRecord& p : parts) {
    if (p.rank < 0 || p.rank >= nodes) continue;
    if (committed_step && p.step <= *committed_step) continue;
    auto& slot = by_step[p.step];
    auto it = slot.find(p.rank);
    if (it == slot.end() || it->second.seq < p.seq) slot[p.rank] = p;
  }
  for (const auto& [step, ranks] : by_step) {
    if (static_cast<int>(ranks.size()) != nodes) continue;
    std::vector<PartRecord> out;
    for (const auto& [rank, part] : ranks) out.push_back(part);
    return out;
  }
  return std::nullopt;
}

RoundOutcome OutcomeOfEnds(const std::vector<RoundEnd>& ends) {
  if (ends.empty()) return RoundOutcome::kRunning;
  bool checkpoint = false, left = false;
  for (const RoundEnd& e : ends) {
    if (e.reason == "complete") return RoundOutcome::kComplete;
    checkpoint |= e.reason == "notice" || e.reason == "stop";
    left |= e.reason == "left";
  }
  // A notice wins over a crash or a stale member: what the others can still
  // save is worth the wait, and a member that is gone adds nothing to it.
  // Not over a member that left before its trainer started: without its
  // part no group snapshot of the round can be made.
  return checkpoint && !left ? RoundOutcome::kCheckpointFirst : RoundOutcome::kStopNow;
}

std::optional<GroupCommit> ResumePoint(const std::vector<GroupCommit>& oldest_first,
                                       std::optional<uint64_t> skip_from,
                                       const std::set<uint64_t>& suspect) {
  for (auto it = oldest_first.rbegin(); it != oldest_first.rend(); ++it) {
    if (skip_from && it->seq >= *skip_from) continue;
    if (suspect.contains(it->seq)) continue;
    return *it;
  }
  return std::nullopt;
}

bool AnswersRequest(const std::map<int, std::optional<int64_t>>& asked, int nodes,
                    std::optional<int64_t> group_step) {
  if (!group_step) return false;
  bool saved_after_a_request = false;
  for (int rank = 0; rank < nodes; ++rank) {
    auto it = asked.find(rank);
    if (it == asked.end()) return false;  // not asked yet: its answer may be newer
    if (it->second && *group_step < *it->second) return false;
    if (!it->second || *group_step > *it->second) saved_after_a_request = true;
  }
  return saved_after_a_request;
}

std::optional<UploadChoice> ChooseUpload(const UploadInput& in) {
  auto have = [&](int64_t step) {
    return std::find(in.local_steps.begin(), in.local_steps.end(), step) != in.local_steps.end();
  };
  auto done = [&](int64_t step) {
    return std::find(in.uploaded.begin(), in.uploaded.end(), step) != in.uploaded.end();
  };
  auto newer_than_committed = [&](int64_t step) {
    return !in.committed_step || step > *in.committed_step;
  };
  std::optional<int64_t> follow;
  for (const PartRecord& p : in.parts) {
    if (p.rank == in.rank || !newer_than_committed(p.step) || done(p.step) || !have(p.step)) {
      continue;
    }
    if (!follow || p.step > *follow) follow = p.step;
  }
  if (follow) return UploadChoice{*follow, UploadReason::kFollow};
  std::optional<int64_t> newest;
  for (int64_t s : in.local_steps) {
    if (!newest || s > *newest) newest = s;
  }
  if (!newest || done(*newest) || !newer_than_committed(*newest)) return std::nullopt;
  if (in.asked && (!in.asked_after || *newest > *in.asked_after)) {
    return UploadChoice{*newest, UploadReason::kAnswer};
  }
  if (in.trainer_done) return UploadChoice{*newest, UploadReason::kLast};
  if (in.periodic_due && !in.asked) return UploadChoice{*newest, UploadReason::kPeriodic};
  return std::nullopt;
}

bool FromBeforeTheRound(const Checkpoint& c, const std::vector<CheckpointMark>& before) {
  return std::any_of(before.begin(), before.end(), [&](const CheckpointMark& m) {
    return m.id == c.id && c.newest_mtime <= m.newest_mtime;
  });
}

}  // namespace sg
