// How a round ends on a group member, in the node policy (docs/design.md §9,
// "A member's coordination"; §14, "Ending a round"): a notice, a stop
// signal, a rebalance recommendation, the group's request and its answer,
// and leaving the round or the group.
#include <algorithm>

#include "agent/config/exit_codes.h"
#include "agent/run/job_policy.h"
#include "agent/run/job_policy_detail.h"
#include "agent/run/notice_budget.h"

namespace sg {

using namespace job_policy_detail;  // NOLINT(google-build-using-namespace)

namespace {

double LeftSeconds(milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }

}  // namespace

void JobPolicy::MemberAsk(PolicyTime t, const InterruptionEvent* notice, const std::string& why,
                          JobActions& out) {
  if (ask_at_) return;  // asked already, on the first notice or signal
  ask_at_ = t.wall;
  const std::optional<uint64_t> round =
      round_ ? std::optional<uint64_t>(round_->round) : std::nullopt;
  out.push_back(job_action::WriteNoticeFile{
      notice ? std::optional<InterruptionEvent>(*notice) : std::nullopt, why, round});
  if (o_.checkpoint_signal && trainer_running_) out.push_back(job_action::SignalTrainer{why});
}

JobActions JobPolicy::MemberInterruption(PolicyTime t, const InterruptionEvent& e,
                                         uint64_t newest_bytes) {
  JobActions out;
  if (phase_ == JobPhase::kDone) return out;
  if (!e.IsNotice()) {
    Event(t, std::string(InterruptionKindName(e.kind)), e.ToJson(), out);  // history
    if (e.kind != InterruptionEvent::Kind::kRebalance) return out;
    CadenceWarned(t, "rebalance recommendation", out);
    if (!o_.snapshot_on_rebalance || phase_ != JobPhase::kTraining || !round_) return out;
    Say(out, Level::kWarn,
        "rebalance recommendation: asking the trainer for a checkpoint, and every other node's "
        "agent to ask its own; the round goes on");
    if (o_.checkpoint_signal && trainer_running_) {
      out.push_back(job_action::SignalTrainer{"the rebalance recommendation"});
    }
    // Its part goes up as soon as it is complete; the other ranks' agents
    // read the flush record, ask their own trainers and upload theirs of
    // the same step (kFollow).
    next_upload_ = t.mono;
    round_->flushes_taken.insert(round_->rank);
    out.push_back(job_action::MarkFlush{round_->newest_step});
    return out;
  }
  milliseconds left = kGroupEndBudget;
  double late = 0;
  if (e.time) {
    left = duration_cast<milliseconds>(*e.time - t.wall);
    late = std::max(0.0, std::chrono::duration<double>(kNoticeLead - left).count());
  }
  Say(out, Level::kWarn,
      Format("INTERRUPTION NOTICE: {} (read {:.1f}s after it was posted)", e.Describe(), late));
  MemberAsk(t, &e, "the notice", out);
  out.push_back(job_action::Notify{"STOPPING=1"});
  Event(t, "notice", e.ToJson(), out);
  switch (phase_) {
    case JobPhase::kRestore:
      LeaveBeforeTraining(t, "notice", out);
      return out;
    case JobPhase::kTraining: {
      Say(out, Level::kWarn,
          Format("interruption notice: ending round {} on every node", round_->round));
      out.push_back(job_action::EndRound{"notice", e.ToJson().dump()});
      // The notice's budget, as one node's: the answer must come in time
      // for its upload at the measured rate; the round is given up on
      // kGiveUpBeforeStop before the deadline, and the trainer stopped then.
      const NoticeBudget budget = ComputeNoticeBudget(left, newest_bytes, upload_rate_);
      Say(out, Level::kInfo,
          Format("{:.1f}s until the deadline; waiting up to {:.1f}s for rank {}'s checkpoint "
                 "(upload estimate {:.1f}s)",
                 LeftSeconds(left), LeftSeconds(budget.wait), round_->rank,
                 LeftSeconds(budget.upload_estimate)));
      BeginEnding(t, t.mono + std::max(left - kGiveUpBeforeStop, milliseconds(0)), true, ask_at_,
                  "the notice", out);
      round_->answer_wait_until = t.mono + budget.wait;
      return out;
    }
    case JobPhase::kFinalSnapshot:
      leaving_ = true;  // it exits once the round's request is answered
      return out;
    default:
      Say(out, Level::kWarn, "interruption notice while not in a round: leaving the group");
      leaving_ = true;
      out.push_back(job_action::LeaveGroup{});
      MemberExit(kExitInterrupted, out);
      return out;
  }
}

JobActions JobPolicy::MemberStopSignal(PolicyTime t) {
  JobActions out;
  if (phase_ == JobPhase::kDone) return out;
  MemberAsk(t, nullptr, "SIGTERM", out);
  out.push_back(job_action::Notify{"STOPPING=1"});
  switch (phase_) {
    case JobPhase::kRestore:
      LeaveBeforeTraining(t, "SIGTERM", out);
      return out;
    case JobPhase::kTraining:
      out.push_back(job_action::EndRound{"stop", "SIGTERM"});
      BeginEnding(t, t.mono + o_.stop_timeout - kGiveUpBeforeStop, true, ask_at_, "SIGTERM", out);
      return out;
    case JobPhase::kFinalSnapshot:
      leaving_ = true;
      return out;
    default:
      MemberExit(kExitInterrupted, out);
      return out;
  }
}

void JobPolicy::LeaveBeforeTraining(PolicyTime /*t*/, const std::string& why, JobActions& out) {
  // Leaving while the part is restored: the round cannot go on without this
  // node, and nothing of it can be saved. Out of the membership first (no
  // more beats either), so that the round's end never finds it planned
  // again; then `left`: the others stop at once.
  Say(out, Level::kWarn, Format("leaving round {} before its trainer started", round_->round));
  leaving_ = true;
  out.push_back(job_action::LeaveGroup{});
  out.push_back(job_action::EndRound{"left", why});
  MemberExit(kExitInterrupted, out);
}

JobActions JobPolicy::OnGroupRequest(PolicyTime t, Clock::MonoTime deadline,
                                     const std::string& warned) {
  JobActions out;
  if (!o_.member || phase_ != JobPhase::kTraining || !round_) return out;
  if (!warned.empty()) CadenceWarned(t, warned + "'s interruption notice", out);
  BeginEnding(t, deadline, false, std::nullopt, "the group's request", out);
  return out;
}

void JobPolicy::BeginEnding(PolicyTime /*t*/, Clock::MonoTime deadline, bool noticed,
                            std::optional<Clock::WallTime> ask_at, const std::string& why,
                            JobActions& out) {
  phase_ = JobPhase::kFinalSnapshot;
  MemberRound& r = *round_;
  // Leaving: the coordinator must not plan the next round with this node.
  if (noticed && !leaving_) out.push_back(job_action::LeaveGroup{});
  leaving_ = leaving_ || noticed;
  r.ending_deadline = deadline;
  r.answer_wait_until.reset();  // a notice sets its own
  r.asked = true;
  r.ask_pending = true;  // asked_after, from the listing below (TakeAsk)
  r.ask_at = ask_at;
  r.answer_step.reset();
  r.answered = false;
  if (!ask_at) {
    out.push_back(job_action::WriteNoticeFile{std::nullopt, why, r.round});
    if (o_.checkpoint_signal && trainer_running_) out.push_back(job_action::SignalTrainer{why});
  }
  out.push_back(job_action::FindCheckpoints{});
}

void JobPolicy::TakeAsk(PolicyTime t, const std::vector<Checkpoint>& newest_first,
                        JobActions& out) {
  MemberRound& r = *round_;
  r.ask_pending = false;
  // A part newer than every checkpoint there was when the trainer was asked
  // answers the request: when MemberAsk asked, what was saved since then is
  // the answer.
  r.asked_after.reset();
  for (const Checkpoint& c : newest_first) {
    if (r.ask_at && c.newest_mtime >= *r.ask_at) continue;
    if (c.step && (!r.asked_after || *c.step > *r.asked_after)) r.asked_after = c.step;
    if (!r.ask_at) break;  // newest first
  }
  const std::optional<int64_t> known = r.ask_at ? r.restored_step : r.part_step;
  if (known && (!r.asked_after || *known > *r.asked_after)) r.asked_after = known;
  // The ledger's request (docs/operations.md, "The ledger"), at the time the
  // notice or signal was read when MemberAsk asked.
  out.push_back(job_action::RecordEvent{
      "checkpoint-request",
      {{"signal", o_.checkpoint_signal.has_value()}, {"round", r.round}},
      r.ask_at.value_or(t.wall)});
  out.push_back(job_action::MarkAsked{r.asked_after});
}

void JobPolicy::DecideEnding(PolicyTime t, const std::vector<Checkpoint>& newest_first,
                             JobActions& out) {
  MemberRound& r = *round_;
  // Over once the coordinator has named the group snapshot that answers the
  // request (read every look), or at the deadline.
  const bool committed = r.answered;
  const bool trainer_answered =
      std::any_of(newest_first.begin(), newest_first.end(), [&](const Checkpoint& c) {
        return c.step && (!r.asked_after || *c.step > *r.asked_after);
      });
  // Past the notice's budget for the trainer's answer, and none came: its
  // upload could not end before the deadline.
  const bool unanswered = !committed && r.answer_wait_until && t.mono >= *r.answer_wait_until &&
                          !upload_ && !r.answer_step && !trainer_answered;
  if (!committed && t.mono < r.ending_deadline && !unanswered) return;
  if (unanswered && t.mono < r.ending_deadline) {
    Say(out, Level::kWarn,
        Format("round {}: the trainer saved no checkpoint in time to upload it before the "
               "deadline",
               r.round));
  } else if (!committed) {
    Say(out, Level::kWarn, Format("round {}: no group snapshot of the answer in time", r.round));
  }
  out.push_back(job_action::RemoveNoticeFile{});
  Event(t, "checkpoint-answer", {{"answered", committed}, {"round", r.round}}, out);
  if (!leaving_) {
    LeaveRound(t, "waiting for the next round", out);
    return;
  }
  r.exit_after_stop = true;
  phase_ = JobPhase::kStopping;
  out.push_back(job_action::StopTrainer{std::min(o_.stop_grace, kLeaveGrace), false});
}

void JobPolicy::LeaveRound(PolicyTime /*t*/, const std::string& why, JobActions& out) {
  Say(out, Level::kInfo, why);
  // An upload still under way is the ended round's: its result is dropped
  // (MemberUploadFinished), and no other starts before it ends.
  if (upload_) out.push_back(job_action::CancelUpload{});
  phase_ = JobPhase::kStopping;
  // The loop goes on (heartbeats, the lease) while the trainer stops.
  out.push_back(job_action::StopTrainer{std::min(o_.stop_grace, kLeaveGrace), true});
}

JobActions JobPolicy::MemberTrainerStopped(PolicyTime t) {
  JobActions out;
  if (phase_ != JobPhase::kStopping || !round_) return out;
  trainer_running_ = false;
  if (round_->exit_after_stop) {
    Event(t, "trainer-stop", {{"round", round_->round}}, out);
    Event(t, "stop", {{"round", round_->round}, {"committed", round_->answered}}, out);
    MemberExit(round_->answered ? kExitInterrupted : kExitNotCommitted, out);
    return out;
  }
  FinishLeaving(t, out);
  return out;
}

void JobPolicy::FinishLeaving(PolicyTime t, JobActions& out) {
  phase_ = JobPhase::kLease;
  const bool answered = round_->answered;
  // The ledger's end of this round for a node that stays (docs/operations.md,
  // "Goodput"): the wait for the next round starts here.
  if (!leaving_) Event(t, "round-end", {{"round", round_->round}}, out);
  round_.reset();
  out.push_back(job_action::RoundLeft{});
  // A node on its way out whose round ended otherwise (a crash, a member
  // gone) before the answer was committed: nothing more to wait for.
  if (leaving_) MemberExit(answered ? kExitInterrupted : kExitNotCommitted, out);
}

JobActions JobPolicy::OnLeave(PolicyTime t, const std::string& why) {
  JobActions out;
  if (!o_.member || !round_ || phase_ == JobPhase::kStopping || phase_ == JobPhase::kDone) {
    return out;
  }
  LeaveRound(t, why, out);
  return out;
}

void JobPolicy::MemberExit(int code, JobActions& out) {
  phase_ = JobPhase::kDone;
  exit_code_ = code;
  out.push_back(job_action::Exit{code});
}

}  // namespace sg
