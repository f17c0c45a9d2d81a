// A member's side of the round protocol (docs/design.md §14): ending a
// round, on a notice, a stop signal or the group's request, and leaving it.
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "agent/config/exit_codes.h"
#include "agent/group/group_agent_impl.h"
#include "agent/run/notice_file.h"
#include "common/log.h"
#include "common/signal_names.h"

namespace sg::group_detail {

void GroupAgent::BeginEnding(Clock::MonoTime now, Clock::MonoTime deadline, bool noticed,
                             std::optional<Clock::WallTime> asked_at) {
  state_ = State::kEnding;
  if (noticed && !noticed_) {
    // Leaving: the coordinator must not plan the next round with this node.
    LeaveMembership();
  }
  noticed_ = noticed_ || noticed;
  ending_deadline_ = deadline;
  answer_wait_until_.reset();  // a notice sets its own (TakeNews)
  // A part newer than every checkpoint there was when the trainer was asked
  // answers the request. Act asked when the notice or signal was read:
  // what was saved since then is the answer.
  auto all = RoundCheckpoints();
  asked_after_.reset();
  if (all.ok()) {
    for (const Checkpoint& c : *all) {
      if (asked_at && c.newest_mtime >= *asked_at) continue;
      if (c.step && (!asked_after_ || *c.step > *asked_after_)) asked_after_ = c.step;
      if (!asked_at) break;  // newest first
    }
  }
  const std::optional<int64_t> known = asked_at ? restored_step_ : part_step_;
  if (known && (!asked_after_ || *known > *asked_after_)) asked_after_ = known;
  asked_ = true;
  answer_step_.reset();
  final_ = false;
  // The ledger's request (docs/operations.md, "The ledger"), at the time the
  // notice or signal was read when Act asked already.
  Event("checkpoint-request",
        {{"signal", cfg_.checkpoint_signal.has_value()}, {"round", plan_->round}}, asked_at);
  Write([this, round = plan_->round, rank = rank_, after = asked_after_] {
    return group_.MarkAsked(round, rank, after);
  },
        "recording the request");
  checkpoints_->SetUrgent(true);
  if (asked_at) return;  // Act wrote the notice file and signalled the trainer
  const std::string why = noticed ? "the notice" : "the group's request";
  if (Status st = WriteNoticeFile(notice_file_, RequestFileJson(c_.clock.Now(), why, plan_->round));
      !st.ok()) {
    LogWarn("writing the notice file failed: {}", st.message());
  }
  AskTrainer(noticed ? "the notice" : "the group's request");
  (void)now;
}

void GroupAgent::Ending(Clock::MonoTime now) {
  if (trainer_ && !trainer_done_) {
    if (auto ended = trainer_->Poll()) trainer_done_ = ended->success();
  }
  TakeUploadResult();
  UploadPart(now);
  // Over once the coordinator has named the group snapshot that answers the
  // request (final_ is read every look), or at the deadline.
  const bool committed = final_;
  // Past the notice's budget for the trainer's answer, and none came: its
  // upload could not end before the deadline.
  const bool unanswered = !committed && answer_wait_until_ && now >= *answer_wait_until_ &&
                          !uploader_.busy() && !answer_step_ && !TrainerAnswered();
  if (!committed && now < ending_deadline_ && !unanswered) return;
  if (unanswered && now < ending_deadline_) {
    LogWarn("round {}: the trainer saved no checkpoint in time to upload it before the deadline",
            plan_->round);
  } else if (!committed) {
    LogWarn("round {}: no group snapshot of the answer in time", plan_->round);
  }
  (void)::unlink(notice_file_.c_str());
  checkpoints_->SetUrgent(false);
  Event("checkpoint-answer", {{"answered", committed}, {"round", plan_->round}});
  if (noticed_) {
    Exit(committed ? kExitInterrupted : kExitNotCommitted);
    if (trainer_) {
      if (auto stopped = trainer_->Stop(
              cfg_.stop_signal,
              duration_cast<milliseconds>(std::min<Duration>(cfg_.stop_grace, kMaxLeaveGrace)));
          stopped.ok()) {
        LogInfo("the trainer stopped: {}", stopped->ToString());
      }
      trainer_.reset();
      Event("trainer-stop", {{"round", plan_->round}});
    }
    Event("stop", {{"round", plan_->round}, {"committed", committed}});
    return;
  }
  LeaveRound("waiting for the next round");
}

void GroupAgent::LeaveRound(const std::string& why) {
  LogInfo("{}", why);
  // An upload still under way is the ended round's: TakeUploadResult drops
  // its result in the next round.
  if (uploader_.busy()) uploader_.Cancel();
  checkpoints_->SetUrgent(false);
  if (trainer_ && trainer_->running() && trainer_->Signal(cfg_.stop_signal).ok()) {
    // The loop goes on (heartbeats, the lease) while the trainer stops.
    stop_deadline_ = c_.clock.Monotonic() +
                     duration_cast<milliseconds>(std::min<Duration>(cfg_.stop_grace, kMaxLeaveGrace));
    state_ = State::kStopping;
    return;
  }
  FinishLeaving();
}

void GroupAgent::Stopping(Clock::MonoTime now) {
  // Done once the trainer and every process of its group are gone: workers
  // that outlive their launcher could still hold the port or write into the
  // checkpoint dir when the next round starts.
  std::optional<ExitStatus> ended = trainer_->Poll();
  if (ended && !trainer_->GroupLingers()) {
    LogInfo("the trainer stopped: {}", ended->ToString());
    FinishLeaving();
    return;
  }
  if (now < stop_deadline_) return;
  LogWarn("the trainer did not stop within its grace after {}", SignalName(cfg_.stop_signal));
  // SIGKILL to what is left of its process group.
  if (auto killed = trainer_->Stop(SIGKILL, milliseconds(0)); killed.ok()) {
    LogInfo("the trainer stopped: {}", killed->ToString());
  }
  FinishLeaving();
}

void GroupAgent::FinishLeaving() {
  stop_deadline_ = {};
  trainer_.reset();  // what it left in its group is finished off the loop (supervisor.h)
  state_ = State::kWaiting;
  // The ledger's end of this round for a node that stays (docs/operations.md,
  // "Goodput"): the wait for the next round starts here.
  if (plan_ && !noticed_) Event("round-end", {{"round", plan_->round}});
  plan_.reset();
  // A node on its way out whose round ended otherwise (a crash, a member
  // gone) before the answer was committed: nothing more to wait for.
  if (noticed_) Exit(final_ ? kExitInterrupted : kExitNotCommitted);
}

}  // namespace sg::group_detail
