// The group executor's run (docs/design.md §14): its setup and the checks
// before a round, the loop that turns the state machine, and the exit with
// its one bound on the work still running.
#include "agent/group/group_agent.h"

#include <poll.h>

#include <algorithm>

#include "agent/run/attempt_record.h"
#include "agent/config/exit_codes.h"
#include "agent/group/group_agent_impl.h"
#include "agent/run/job_end.h"
#include "agent/run/job_start.h"
#include "agent/repo/store_layout.h"
#include "common/log.h"
#include "common/orphan_reaper.h"

namespace sg::group_detail {

AgentResult GroupAgent::Run() {
  if (pid1_) LogInfo("running as PID 1: reaping every orphaned process");
  if (Status st = Setup(); !st.ok()) {
    LogError("{}", st.message());
    result_.exit_code = exit_code_.value_or(kExitFailure);
    return result_;
  }
  if (auto marker = c_.store.Head(CompleteKey(cfg_.job)); marker.ok()) {
    LogInfo("job {} is already complete; not starting it again", cfg_.job);
    (void)c_.notifier.Notify("READY=1");
    PerformOnComplete({cfg_, c_.env, asg_, events_, c_.instance});
    result_.exit_code = kExitOk;
    return result_;
  }
  // A job that ran on one node is not silently started over by a group.
  if (Status st = CheckGroupStart(c_.store, cfg_); !st.ok()) {
    LogError("{}", st.message());
    result_.exit_code = st.Is(StatusCode::kInvalidArgument) ? kExitUsage : kExitFailure;
    return result_;
  }
  // The ledger's first event of this attempt (docs/operations.md, "The ledger").
  Event("agent-start", AgentStartDetails(c_.identity, c_.launch_time));
  // READY=1 comes once this node's part is restored (SayReady).
  (void)c_.notifier.Notify("STATUS=waiting for " + std::to_string(cfg_.nodes) + " members");
  if (!watch_on_loop_) watch_->Start();
  Loop();
  return End();
}

void GroupAgent::Loop() {
  while (state_ != State::kDone) {
    if (c_.ports.idle) {
      c_.ports.idle(kTick);
    } else {
      pollfd fd{checkpoints_->fd(), POLLIN, 0};
      ::poll(&fd, 1, static_cast<int>(kTick.count()));
      // PID 1 of a container inherits every orphan (docs/design.md §11).
      if (pid1_) ReapOrphanedChildren();
    }
    if (watch_on_loop_) watch_->Turn(c_.ports.stop_requested && c_.ports.stop_requested());
    const auto now = c_.clock.Monotonic();
    if (ready_) watchdog_.Tick(now);
    checkpoints_->Poll();
    TakeNews(now);
    logs_.Tick(now, state_ == State::kInRound, log_round_);
    Beat(now);
    KeepLease(now);
    if (state_ == State::kDone) break;
    Look(now);
    if (state_ == State::kJoining) Joining();
    if (state_ == State::kInRound) InRound(now);
    if (state_ == State::kEnding) Ending(now);
    if (state_ == State::kStopping) Stopping(now);
  }
}

AgentResult GroupAgent::End() {
  watch_->LoopStopsTrainer();
  if (trainer_) {
    auto grace = duration_cast<milliseconds>(cfg_.stop_grace);
    if (stop_deadline_ != Clock::MonoTime{}) {
      // Asked to stop already (kStopping): what is left of that grace.
      grace = std::clamp(duration_cast<milliseconds>(stop_deadline_ - c_.clock.Monotonic()),
                         milliseconds(0), grace);
    }
    if (auto stopped = trainer_->Stop(cfg_.stop_signal, grace); stopped.ok()) {
      LogInfo("the trainer stopped: {}", stopped->ToString());
    }
    trainer_.reset();
  }
  // One bound on the exit for the work still running (the upload, the
  // restore, retention), as one node's agent has (EndStoreWork): kExitBound
  // in all, and never past a second before the deadline of a notice.
  auto until = c_.clock.Monotonic() + kExitBound;
  if (auto deadline = watch_->deadline()) until = std::min(until, *deadline - milliseconds(1'000));
  auto left = [&] {
    return std::max(milliseconds(0), duration_cast<milliseconds>(until - c_.clock.Monotonic()));
  };
  if (uploader_.busy() && !uploader_.Wait(left())) {
    LogWarn("the upload of this node's part still runs at the exit");
  }
  if (restore_.busy() && !restore_.WaitFor(left())) {
    LogWarn("the restore of this node's part still runs at the exit");
    restore_left_ = true;
  }
  // On a notice, once the trainer is stopped and the last part is in, as
  // one node's agent does (docs/agent.md, "How it ends").
  if (lifecycle_due_) CompleteLifecycleHook({cfg_, c_.env, asg_, events_, c_.instance});
  FinishStoppedTrainers();
  if (pid1_) ReapOrphanedChildren();
  FlushEvents();
  // Until the process ends the watch keeps its deadline: the store calls
  // below can hang too.
  Noted(group_.RemoveMember(self_.agent), "leaving the membership");
  if (lease_.held()) {
    if (Status st = lease_.Release(); !st.ok()) LogWarn("releasing the lease failed: {}", st.message());
  }
  // An upload given up on, or a log shipment, still runs on its thread and
  // uses the agent and the store: the process ends without destroying them.
  threads_left_ = uploader_.left_any() || restore_left_;
  if (!store_work_.DrainFor(left())) {
    LogWarn("retention still runs at the exit; it is left to the next coordinator");
    threads_left_ = true;
  }
  if (!logs_.Flush(log_round_, threads_left_, watch_->deadline())) threads_left_ = true;
  watch_->Stop();
  result_.abandoned = threads_left_;
  result_.exit_code = exit_code_.value_or(kExitFailure);
  return result_;
}

}  // namespace sg::group_detail

namespace sg {

AgentResult RunGroupAgent(const AgentContext& context) {
  auto agent = std::make_unique<group_detail::GroupAgent>(context);
  AgentResult result = agent->Run();
  // A log shipment given up on still uses the agent: the process ends with it.
  if (agent->threads_left()) (void)agent.release();  // NOLINT(bugprone-unused-return-value)
  return result;
}

}  // namespace sg
