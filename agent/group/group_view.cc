// Reading the round (docs/design.md §14): a look is one call off the loop
// that reads what the node's state needs (ReadView); the loop acts on its
// result when it comes back (TakeView).
#include <algorithm>

#include "agent/group/group_agent_impl.h"
#include "agent/repo/group_protocol.h"
#include "agent/repo/group_quarantine.h"
#include "agent/repo/group_suspect.h"
#include "common/log.h"

namespace sg::group_detail {

void GroupAgent::Look(Clock::MonoTime now) {
  if (look_busy_ || now < next_look_) return;
  const bool in_round = phase() == JobPhase::kTraining || phase() == JobPhase::kFinalSnapshot;
  if (phase() != JobPhase::kLease && !in_round) return;
  next_look_ = now + std::clamp(duration_cast<milliseconds>(cfg_.group.heartbeat) / 4, kMinLook,
                                kMaxLook);
  GroupView view;
  view.waiting = phase() == JobPhase::kLease;
  view.round = in_round ? plan_->round : 0;
  view.coordinating = coordinating_;
  look_busy_ = true;
  calls_.Post<GroupView>(
      [this, view, ending = phase() == JobPhase::kFinalSnapshot] { return ReadView(view, ending); },
      [this](GroupView& read) {
        look_busy_ = false;
        TakeView(c_.clock.Monotonic(), read);
      });
}

GroupView GroupAgent::ReadView(GroupView view, bool ending) {
  view.members = group_.Members();
  if (!view.members.ok()) return view;
  if (!view.waiting) {
    view.ends = group_.Ends(view.round);
    view.parts = group_.Parts(view.round);
    view.groups = group_.ListGroups();
    if (view.coordinating) view.done = group_.Done(view.round);
    if (!ending) view.flushes = group_.Flushes(view.round);
    if (ending) view.final = group_.Final(view.round);
    if (ending && view.coordinating) view.asked = group_.Asked(view.round);
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
  if (view.coordinating && (!plan || ended)) {
    view.suspects = GroupSuspects(c_.store, cfg_.job);
    // The coordinator alone chooses the group snapshot a round resumes
    // from, and names it in the plan: every member restores that one
    // (docs/design.md §14, "Quarantine in a group").
    if (view.groups && view.groups->ok()) {
      auto q = ReadGroupQuarantine(c_.store, cfg_.job, (*view.groups)->groups);
      if (q.ok()) {
        view.quarantined = std::move(q->needs);
      } else {
        view.quarantined = q.status();
      }
    }
  }
  return view;
}

void GroupAgent::TakeView(Clock::MonoTime now, GroupView& view) {
  Perform(policy_->OnView(now, view, Facts()));
}

}  // namespace sg::group_detail
