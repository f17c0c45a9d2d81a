// The round protocol's decisions (docs/design.md §14, "The group policy"), a
// state machine like agent/run/job_policy.h's. Its inputs are observations:
// a look's reads (GroupView), what the node is doing (GroupFacts), the time,
// and the results of the writes it asked for. Its outputs are actions, which
// the group executor (agent/group/group_agent*.cc) performs, posting each
// store write off its loop. The policy touches no clock, process, file or
// store, so each decision is tested with plain values
// (tests/unit/group_policy_test.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "agent/config/config.h"
#include "agent/repo/group_protocol.h"
#include "agent/repo/group_store.h"
#include "agent/repo/group_suspect.h"
#include "agent/run/job_policy_member.h"
#include "agent/run/notice_budget.h"
#include "common/clock.h"
#include "common/status.h"

namespace sg {

// What one look read from the store, off the loop, for the phase and round
// it was posted in; each read is nullopt when the look did not need it.
struct GroupView {
  bool waiting = false;  // read while waiting for a round, else for the round `round`
  uint64_t round = 0;
  bool coordinating = false;  // the node held the lease when the look was posted
  StatusOr<std::map<std::string, std::pair<std::string, MemberRecord>>> members =
      Status::Unavailable("not read");
  std::optional<StatusOr<std::optional<std::string>>> refusal;
  std::optional<StatusOr<std::optional<FailureRecord>>> failed;
  std::optional<StatusOr<PlanListing>> plans;
  std::optional<StatusOr<std::vector<RoundEnd>>> ends;  // of the newest plan, or of `round`
  std::optional<StatusOr<GroupListing>> groups;
  std::optional<StatusOr<std::set<uint64_t>>> suspects;
  // Group seq -> the quarantined objects its parts need (relative to
  // "<job>/"; agent/repo/group_quarantine.h): read with `suspects`.
  std::optional<StatusOr<std::map<uint64_t, std::vector<std::string>>>> quarantined;
  std::optional<StatusOr<std::vector<PartRecord>>> parts;
  std::optional<StatusOr<std::map<int, std::optional<int64_t>>>> flushes, asked, done;
  std::optional<StatusOr<std::optional<uint64_t>>> final;
};

// What the node is doing when a look's result comes back.
struct GroupFacts {
  enum class Phase { kWaiting, kInRound, kEnding, kOther };
  Phase phase = Phase::kWaiting;
  std::optional<RoundPlan> plan;  // the round it takes part in
  bool coordinating = false;      // the lease, as the calls last said
  uint64_t generation = 0;        // its generation
  bool answered = false;          // kEnding: the round's answer is named (final.json)
};

struct GroupPolicyOptions {
  int nodes = 1;
  int port = 29500;
  int restart_max = 3;
  std::chrono::milliseconds restart_backoff{10'000};
  std::chrono::milliseconds restart_max_backoff{300'000};
  std::chrono::milliseconds member_timeout{30'000};  // group.timeout
  std::chrono::milliseconds stop_timeout{120'000};
  int resume_max_failures = 2;
  std::string settings;  // SettingsDigest of this node's config
  std::string instance;  // this node's, for the records it writes
  std::string job;

  static GroupPolicyOptions FromConfig(const Config& config, const std::string& instance);
};

namespace group_action {
struct Log {
  enum class Level { kInfo, kWarn, kError } level = Level::kInfo;
  std::string message;
};
struct Exit {
  int code = 0;
};
struct Event {
  std::string kind;
  nlohmann::ordered_json details;
};
// Store writes; the executor posts each off the loop.
struct ClearFailure {  // answer with OnFailureCleared
  FailureRecord failure;
};
struct Refuse {
  std::string agent, instance, why;
};
struct WritePlan {
  RoundPlan plan;
};
struct EndRound {
  uint64_t round = 0;
  RoundEnd end;
};
struct Commit {  // answer with OnCommitted
  GroupCommit group;
};
struct NameAnswer {  // final.json
  uint64_t round = 0, seq = 0;
  int64_t step = 0;
};
struct Complete {  // the complete marker and the round's end; answer with OnCompleted
  uint64_t round = 0;
  std::optional<uint64_t> seq;
  std::optional<int64_t> step;
};
struct MarkFailed {
  FailureRecord failure;
};
struct MarkSuspect {
  uint64_t seq = 0;
  nlohmann::ordered_json record;
};
// The member's side.
struct Join {  // the node's rank in `plan`: restore `group`'s part (none: fresh)
  RoundPlan plan;
  std::optional<GroupCommit> group;
};
struct AskForCheckpoint {  // the group asks: end the round once answered, or at `deadline`
  Clock::MonoTime deadline{};
  std::string warned;  // the other member whose notice ends the round; "" for none
};
struct Leave {  // stop the trainer and wait for the next round
  std::string why;
};
// What a look read of the round, for the node policy's OnRoundRead
// (agent/run/job_policy_member.h): its uploads, flushes and answer.
struct RoundRead : RoundNews {};
struct JobComplete {};  // exit 0; on_complete at the exit
struct Retain {};       // retention, off the loop
}  // namespace group_action

using GroupAction =
    std::variant<group_action::Log, group_action::Exit, group_action::Event,
                 group_action::ClearFailure, group_action::Refuse, group_action::WritePlan,
                 group_action::EndRound, group_action::Commit, group_action::NameAnswer,
                 group_action::Complete, group_action::MarkFailed, group_action::MarkSuspect,
                 group_action::Join, group_action::AskForCheckpoint, group_action::Leave,
                 group_action::RoundRead, group_action::JobComplete,
                 group_action::Retain>;
using GroupActions = std::vector<GroupAction>;

class GroupPolicy {
 public:
  GroupPolicy(GroupPolicyOptions options, MemberRecord self);

  // A look's result, with the node's facts when it came back. A look read
  // for a phase or round that has passed is not acted on.
  GroupActions OnView(Clock::MonoTime now, const GroupView& view, const GroupFacts& facts);
  // Results of the writes the policy asked for.
  GroupActions OnFailureCleared(const FailureRecord& failure, const Status& st);
  GroupActions OnCommitted(const GroupCommit& g, const Status& st);
  GroupActions OnCompleted(const Status& st);

  // Whether this node may try for the lease: a newcomer leaves it to the
  // last round's members while one is alive.
  bool MayCoordinate(Clock::MonoTime now) const;
  // The newest plan was read at least once (the lease is not tried before).
  bool plan_read() const { return plan_read_; }

 private:
  void Waiting(Clock::MonoTime now, const GroupView& view, const GroupFacts& facts);
  // Whether the newest plan's round has ended; nullopt when nothing more
  // is to be done on this look.
  std::optional<bool> RoundEnded(const RoundPlan& plan, const GroupView& view);
  void PlanRound(Clock::MonoTime now, const std::optional<RoundPlan>& plan,
                 const GroupView& view, const GroupFacts& facts);
  void InRound(Clock::MonoTime now, const GroupView& view, const GroupFacts& facts);
  void Coordinate(Clock::MonoTime now, const std::vector<PartRecord>* parts,
                  const std::optional<GroupCommit>& newest, const GroupView& view,
                  const GroupFacts& facts);
  void CompleteIfDone(const std::optional<GroupCommit>& newest, const GroupView& view,
                      const GroupFacts& facts);
  bool StopsOnFailure(const FailureRecord& failure);
  void RefuseOdd(Clock::MonoTime now);
  void FailJob(const std::string& why, const std::optional<RoundPlan>& plan);
  void GuardResume(const RoundPlan& plan, const std::vector<RoundEnd>& ends, bool crash,
                   const GroupView& view, bool coordinating);
  std::optional<GroupCommit> NewestGroup(const StatusOr<GroupListing>& listing);
  void Say(group_action::Log::Level level, std::string message);

  const GroupPolicyOptions o_;
  const MemberRecord self_;
  MemberFreshness freshness_;
  GroupResumeGuard resume_guard_;
  GroupActions out_;  // of the call under way
  bool exited_ = false;
  std::optional<RoundPlan> newest_plan_;  // as last read while waiting
  bool plan_read_ = false;
  uint64_t next_round_ = 1;       // above every round whose plan key is listed
  uint64_t next_group_seq_ = 1;   // above every group snapshot key listed
  std::optional<uint64_t> skip_from_;  // a group snapshot a member could not restore
  std::set<std::string> refused_;      // members refused, by agent identity
  uint64_t counted_round_ = 0;         // the last ended round counted in crash_rounds_
  int crash_rounds_ = 0;               // rounds in a row ended by a crash
  Clock::MonoTime next_plan_at_{};
  bool suspect_posted_ = false;  // a mark was asked for on this look
  bool committing_ = false, completing_ = false;
};

}  // namespace sg
