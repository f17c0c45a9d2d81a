// The round protocol's decisions (agent/group/group_policy.h; docs/design.md §14):
// reading a look, waiting for a round, planning one (the coordinator),
// failing the job and marking suspects. The coordinator's decisions within
// a round are group_policy_round.cc's.
#include "agent/group/group_policy.h"

#include <algorithm>

#include "agent/config/exit_codes.h"
#include "agent/repo/store_names.h"
#include "agent/trainer/restart_backoff.h"
#include "common/log.h"
#include "common/strings.h"

namespace sg {

namespace a = group_action;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

GroupPolicyOptions GroupPolicyOptions::FromConfig(const Config& config,
                                                  const std::string& instance) {
  GroupPolicyOptions o;
  o.nodes = config.nodes;
  o.port = config.group.port;
  o.restart_max = config.restart.max;
  o.restart_backoff = duration_cast<milliseconds>(config.restart.backoff);
  o.restart_max_backoff = duration_cast<milliseconds>(config.restart.max_backoff);
  o.member_timeout = duration_cast<milliseconds>(config.group.timeout);
  o.stop_timeout = duration_cast<milliseconds>(config.stop_timeout);
  o.resume_max_failures = config.resume.max_failures;
  o.settings = SettingsDigest(config);
  o.instance = instance;
  o.job = config.job;
  return o;
}

GroupPolicy::GroupPolicy(GroupPolicyOptions options, MemberRecord self)
    : o_(std::move(options)),
      self_(std::move(self)),
      freshness_(o_.member_timeout),
      resume_guard_(o_.resume_max_failures) {}

void GroupPolicy::Say(a::Log::Level level, std::string message) {
  out_.push_back(a::Log{level, std::move(message)});
}

bool GroupPolicy::MayCoordinate(Clock::MonoTime now) const {
  return sg::MayCoordinate(self_, newest_plan_, freshness_.FreshMembers(now));
}

GroupActions GroupPolicy::OnView(Clock::MonoTime now, const GroupView& view,
                                 const GroupFacts& facts) {
  out_.clear();
  // A look read for a phase or round that has passed is not acted on.
  const bool in_round =
      facts.phase == GroupFacts::Phase::kInRound || facts.phase == GroupFacts::Phase::kEnding;
  if (exited_ || (view.waiting ? facts.phase != GroupFacts::Phase::kWaiting
                               : !in_round || !facts.plan || facts.plan->round != view.round)) {
    return {};
  }
  if (!view.members.ok()) {
    Say(a::Log::Level::kWarn, "listing the members failed: " +
                                  std::string(view.members.status().message()));
    return std::move(out_);
  }
  freshness_.Observe(now, *view.members);
  if (view.waiting) {
    Waiting(now, view, facts);
  } else {
    InRound(now, view, facts);
  }
  return std::move(out_);
}

void GroupPolicy::Waiting(Clock::MonoTime now, const GroupView& view, const GroupFacts& facts) {
  const bool coordinating = view.coordinating && facts.coordinating;
  // The coordinator's settings are the group's: a member that differs is refused.
  if (view.refusal->ok() && **view.refusal) {
    Say(a::Log::Level::kError, "refused by the group's coordinator: " + ***view.refusal);
    out_.push_back(a::Exit{kExitUsage});
    exited_ = true;
    return;
  }
  if (view.failed->ok() && **view.failed && StopsOnFailure(***view.failed)) return;
  if (coordinating) RefuseOdd(now);
  if (!view.plans->ok()) {
    Say(a::Log::Level::kWarn,
        "reading the newest plan failed: " + std::string(view.plans->status().message()));
    return;
  }
  newest_plan_ = (*view.plans)->newest;
  next_round_ = (*view.plans)->NextRound();
  plan_read_ = true;
  bool ended = false;
  if (newest_plan_) {
    const std::optional<bool> read = RoundEnded(*newest_plan_, view);
    if (!read) return;
    ended = *read;
  }
  // A suspect mark was just asked for: the next look reads it before a
  // round is planned.
  if (std::exchange(suspect_posted_, false)) return;
  if (!coordinating || (newest_plan_ && !ended) || now < next_plan_at_) return;
  PlanRound(now, newest_plan_, view, facts);
}

std::optional<bool> GroupPolicy::RoundEnded(const RoundPlan& plan, const GroupView& view) {
  const auto& ends = *view.ends;
  if (!ends.ok()) return std::nullopt;
  const bool ended = !ends->empty();
  for (const RoundEnd& e : *ends) {
    if (e.reason == "complete") {
      out_.push_back(a::JobComplete{});
      exited_ = true;
      return std::nullopt;
    }
    if (e.reason == "restore" && plan.resume_seq) skip_from_ = plan.resume_seq;
  }
  // Rounds in a row that a crash ended (each counted once), an exit 0 that
  // complete_when did not accept among them; any other end resets it. Only a
  // non-zero exit counts against the snapshot the round resumed from.
  if (ended && counted_round_ != plan.round) {
    counted_round_ = plan.round;
    const auto any = [&](const char* reason) {
      return std::any_of(ends->begin(), ends->end(),
                         [&](const RoundEnd& e) { return e.reason == reason; });
    };
    const bool crash = any("crash");
    crash_rounds_ = crash || any("unearned") ? crash_rounds_ + 1 : 0;
    GuardResume(plan, *ends, crash, view, view.coordinating);
  }
  if (!ended && plan.RankOf(self_.agent)) {
    std::optional<GroupCommit> group;
    if (plan.resume_seq && view.groups && view.groups->ok()) {
      for (const GroupCommit& g : (*view.groups)->groups) {
        if (g.seq == *plan.resume_seq) group = g;
      }
    }
    out_.push_back(a::Join{plan, group});
    return std::nullopt;
  }
  return ended;
}

void GroupPolicy::PlanRound(Clock::MonoTime now, const std::optional<RoundPlan>& plan,
                            const GroupView& view, const GroupFacts& facts) {
  if (crash_rounds_ > o_.restart_max) {
    FailJob(Format("a trainer crashed in {} rounds in a row (restart.max {})", crash_rounds_,
                   o_.restart_max),
            plan);
    return;
  }
  // The group snapshot to resume from: the newest one every member could
  // restore, the trainers did not fail to resume from, and whose parts need
  // no quarantined object (docs/design.md §14, "Quarantine in a group").
  if (!view.groups || !view.groups->ok() || !view.suspects || !view.quarantined) return;
  const std::vector<GroupCommit>& groups = (*view.groups)->groups;
  const auto& suspects = *view.suspects;
  const auto& quarantined = *view.quarantined;
  for (const Status& st : {suspects.status(), quarantined.status()}) {
    if (st.ok()) continue;
    Say(a::Log::Level::kWarn,
        "listing the suspect or quarantined group snapshots failed (will retry): " +
            std::string(st.message()));
    return;
  }
  std::set<uint64_t> passed_over = *suspects;
  for (const auto& [seq, keys] : *quarantined) passed_over.insert(seq);
  const std::optional<GroupCommit> from = ResumePoint(groups, skip_from_, passed_over);
  if (!from && ResumePoint(groups, skip_from_)) {
    // Starting fresh would throw every step away: the job fails instead.
    FailJob(quarantined->empty()
                ? "every group snapshot is suspect (spotguard unsuspect SEQ clears one)"
                : "every group snapshot is suspect (spotguard unsuspect SEQ clears one) or "
                  "needs a quarantined object (`spotguard status` names them)",
            plan);
    return;
  }
  if (from && from->nodes != o_.nodes) {
    Say(a::Log::Level::kError,
        Format("group snapshot {} was made by {} nodes, and this job has nodes: {}; restore it "
               "with nodes: {}, or start the job under another name",
               SeqName(from->seq), from->nodes, o_.nodes, from->nodes));
    out_.push_back(a::Exit{kExitUsage});
    exited_ = true;
    return;
  }
  // The round's number comes from the plan keys listed: an unreadable plan
  // at the top is passed over, never planned again.
  const uint64_t round = std::max(next_round_, plan ? plan->round + 1 : 1);
  auto next = PlanNextRound(self_, freshness_.FreshMembers(now), o_.nodes, plan, round,
                            facts.generation, o_.port,
                            from ? std::optional<uint64_t>(from->seq) : std::nullopt,
                            from ? std::optional<int64_t>(from->step) : std::nullopt);
  if (!next) return;  // not enough members yet
  // Crash restarts wait as a single node's do (restart.backoff, max_backoff).
  if (const auto wait = RestartBackoff(crash_rounds_, o_.restart_backoff, o_.restart_max_backoff);
      wait.count() > 0 && next_plan_at_ == Clock::MonoTime{}) {
    next_plan_at_ = now + wait;
    Say(a::Log::Level::kInfo,
        Format("round {} waits {:.1f} s (restart.backoff: {} round(s) in a row ended by a crash)",
               next->round, std::chrono::duration<double>(wait).count(), crash_rounds_));
    return;
  }
  next_plan_at_ = {};
  for (const auto& [seq, keys] : *quarantined) {
    if (from && seq > from->seq && !suspects->contains(seq)) {
      Say(a::Log::Level::kWarn,
          Format("round {} passes over group snapshot {}: it needs the quarantined object(s) {}",
                 next->round, SeqName(seq), Join(keys, ", ")));
    }
  }
  // The next look, whose call is posted after this write, reads the plan.
  out_.push_back(a::WritePlan{*next});
}

void GroupPolicy::RefuseOdd(Clock::MonoTime now) {
  for (const MemberRecord& m : freshness_.FreshMembers(now)) {
    if (m.agent == self_.agent) continue;
    if (auto diff = ConfigDifference(m, self_)) {
      if (refused_.insert(m.agent).second) {
        Say(a::Log::Level::kWarn, Format("refusing member {} ({}): {}", m.agent, m.instance, *diff));
        out_.push_back(a::Refuse{m.agent, m.instance, *diff});
      }
    }
  }
}

bool GroupPolicy::StopsOnFailure(const FailureRecord& failure) {
  if (!failure.settings.empty() && failure.settings != o_.settings) {
    Say(a::Log::Level::kWarn,
        Format("job {} failed earlier ({}), and its command or config changed since: clearing "
               "the failure",
               o_.job, failure.why));
    // The next look, posted after this write, reads the record gone.
    out_.push_back(a::ClearFailure{failure});
    return true;
  }
  Say(a::Log::Level::kError,
      Format("job {} failed: {}{}. To go on, fix the trainer and run `spotguard reset-failure` "
             "with this job's config, or change its command or config; until then every node "
             "exits 1",
             o_.job, failure.why, failure.time.empty() ? "" : " (at " + failure.time + ")"));
  out_.push_back(a::Exit{kExitFailure});
  exited_ = true;
  return true;
}

GroupActions GroupPolicy::OnFailureCleared(const FailureRecord& failure, const Status& st) {
  if (!st.ok()) {
    return {a::Log{a::Log::Level::kWarn,
                   "clearing the failure failed (will retry): " + std::string(st.message())}};
  }
  // The round that failed is not counted again against the new settings.
  counted_round_ = failure.round;
  crash_rounds_ = 0;
  return {a::Event{"failure-cleared", {{"why", failure.why}, {"by", "changed settings"}}}};
}

void GroupPolicy::FailJob(const std::string& why, const std::optional<RoundPlan>& plan) {
  Say(a::Log::Level::kError, Format("job {} failed: {}", o_.job, why));
  out_.push_back(a::MarkFailed{FailureRecord{why, "", plan ? plan->round : 0, o_.settings}});
  out_.push_back(a::Event{"failed", {{"why", why}}});
  out_.push_back(a::Exit{kExitFailure});
  exited_ = true;
}

std::optional<GroupCommit> GroupPolicy::NewestGroup(const StatusOr<GroupListing>& listing) {
  if (!listing.ok()) {
    Say(a::Log::Level::kWarn,
        "listing the group snapshots failed: " + std::string(listing.status().message()));
    return std::nullopt;
  }
  next_group_seq_ = listing->NextSeq();
  if (listing->groups.empty()) return std::nullopt;
  return listing->groups.back();
}

void GroupPolicy::GuardResume(const RoundPlan& plan, const std::vector<RoundEnd>& ends,
                              bool crash, const GroupView& view, bool coordinating) {
  std::string why;
  for (const RoundEnd& e : ends) {
    why += (why.empty() ? "" : "; ") + e.reason + " on " + e.by +
           (e.detail.empty() ? "" : " (" + e.detail + ")");
  }
  // Rounds only grow: a group snapshot committed in this round is the newest.
  bool committed = false;
  if (crash && plan.resume_seq && view.groups) {
    const std::optional<GroupCommit> newest = NewestGroup(*view.groups);
    committed = newest && newest->round == plan.round;
  }
  const std::optional<uint64_t> suspect = resume_guard_.RoundEnded(
      plan.resume_seq, crash, committed, "round " + std::to_string(plan.round) + ": " + why);
  if (!suspect) return;
  // Each member counts the same ends; the coordinator writes the mark.
  crash_rounds_ = 0;  // the fallback's rounds are counted afresh, as one node's restarts are
  Say(a::Log::Level::kError,
      Format("the trainers failed {} round(s) in a row resumed from group snapshot {} without a "
             "newer one: it is suspect, and the next round resumes from the newest group "
             "snapshot that is not (spotguard unsuspect {} clears the mark)",
             resume_guard_.ends().size(), SeqName(*suspect), *suspect));
  if (!coordinating) return;
  const nlohmann::ordered_json record = {
      {"seq", *suspect}, {"instance", o_.instance}, {"rounds", resume_guard_.ends()}};
  suspect_posted_ = true;
  out_.push_back(a::MarkSuspect{*suspect, record});
  out_.push_back(a::Event{"suspect", record});
}

}  // namespace sg
