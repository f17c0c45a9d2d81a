// Reading the round (docs/design.md §14): a look is one call off the loop
// that reads what the node's state needs (ReadView); the loop acts on its
// result when it comes back (TakeView).
#include <algorithm>

#include "agent/config/exit_codes.h"
#include "agent/group/group_agent_impl.h"
#include "agent/repo/group_protocol.h"
#include "agent/repo/group_suspect.h"
#include "common/log.h"

namespace sg::group_detail {

void GroupAgent::Look(Clock::MonoTime now) {
  if (look_busy_ || now < next_look_) return;
  const bool in_round = state_ == State::kInRound || state_ == State::kEnding;
  if (state_ != State::kWaiting && !in_round) return;
  next_look_ = now + std::clamp(duration_cast<milliseconds>(cfg_.group.heartbeat) / 4, kMinLook,
                                kMaxLook);
  GroupView view;
  view.waiting = state_ == State::kWaiting;
  view.round = in_round ? plan_->round : 0;
  view.coordinating = coordinating_;
  look_busy_ = true;
  calls_.Post<GroupView>(
      [this, view, ending = state_ == State::kEnding] {
        GroupView read = ReadView(view);
        if (!read.waiting && read.members.ok()) {
          if (!ending) read.flushes = group_.Flushes(read.round);
          if (ending) read.final = group_.Final(read.round);
          if (ending && read.coordinating) read.asked = group_.Asked(read.round);
        }
        return read;
      },
      [this](GroupView& read) {
        look_busy_ = false;
        TakeView(c_.clock.Monotonic(), read);
      });
}

GroupView GroupAgent::ReadView(GroupView view) {
  view.members = group_.Members();
  if (!view.members.ok()) return view;
  if (!view.waiting) {
    view.ends = group_.Ends(view.round);
    view.parts = group_.Parts(view.round);
    view.groups = group_.ListGroups();
    if (view.coordinating) view.done = group_.Done(view.round);
    return view;
  }
  view.refusal = group_.Refusal(self_.agent);
  view.failed = group_.Failed();
  view.plans = group_.Plans();
  if (!view.plans->ok()) return view;
  const std::optional<RoundPlan>& plan = (*view.plans)->newest;
  if (plan) view.ends = group_.Ends(plan->round);
  const bool ended = plan && view.ends->ok() && !(*view.ends)->empty();
  // What joining the plan (its group snapshot), counting its crash
  // (GuardResume) or planning the next round needs.
  if (view.coordinating || (plan && plan->resume_seq && (ended || plan->RankOf(self_.agent)))) {
    view.groups = group_.ListGroups();
  }
  if (view.coordinating && (!plan || ended)) view.suspects = GroupSuspects(c_.store, cfg_.job);
  return view;
}

void GroupAgent::TakeView(Clock::MonoTime now, GroupView& view) {
  // A look read for a state or round that has passed is not acted on.
  const bool in_round = state_ == State::kInRound || state_ == State::kEnding;
  if (view.waiting ? state_ != State::kWaiting
                   : !in_round || !plan_ || plan_->round != view.round) {
    return;
  }
  if (!view.members.ok()) {
    LogWarn("listing the members failed: {}", view.members.status().message());
    return;
  }
  freshness_.Observe(now, *view.members);
  const bool coordinating = view.coordinating && coordinating_;
  if (view.waiting) {
    // The coordinator's settings are the group's: a member that differs is refused.
    if (view.refusal->ok() && **view.refusal) {
      LogError("refused by the group's coordinator: {}", ***view.refusal);
      Exit(kExitUsage);
      return;
    }
    if (view.failed->ok() && **view.failed && StopsOnFailure(***view.failed)) return;
    if (coordinating) RefuseOdd(now);
    if (!view.plans->ok()) {
      LogWarn("reading the newest plan failed: {}", view.plans->status().message());
      return;
    }
    newest_plan_ = (*view.plans)->newest;
    next_round_ = (*view.plans)->NextRound();
    plan_read_ = true;
    Waiting(now, newest_plan_, view);
    return;
  }
  const auto& ends = *view.ends;
  const RoundOutcome outcome = ends.ok() ? OutcomeOfEnds(*ends) : RoundOutcome::kRunning;
  if (outcome == RoundOutcome::kComplete) {
    JobComplete();
    return;
  }
  if (outcome == RoundOutcome::kCheckpointFirst && state_ == State::kInRound) {
    LogInfo("round {} ends: {} on {}; asking the trainer for a checkpoint", plan_->round,
            ends->front().reason, ends->front().by);
    BeginEnding(now, now + std::min<Duration>(kGroupEndBudget, cfg_.stop_timeout), false);
  } else if (outcome == RoundOutcome::kStopNow) {
    const RoundEnd& first = ends->front();
    LeaveRound("round " + std::to_string(plan_->round) + " ended: " + first.reason + " on " +
               first.by + (first.detail.empty() ? "" : " (" + first.detail + ")"));
    return;
  }
  const auto& parts = *view.parts;
  if (parts.ok()) round_parts_ = *parts;
  if (state_ == State::kInRound && view.flushes && view.flushes->ok()) {
    TakeFlushes(now, **view.flushes);
  }
  const std::optional<GroupCommit> newest = NewestGroup(*view.groups);
  if (newest) group_step_ = newest->step;
  // The coordinator decides on what this look read (no second listing).
  if (coordinating) Coordinate(now, parts.ok() ? &*parts : nullptr, newest, view);
  if (state_ == State::kEnding && !final_ && view.final && view.final->ok() && **view.final) {
    final_ = true;
  }
}

}  // namespace sg::group_detail
