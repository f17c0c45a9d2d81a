// The group executor's run (docs/design.md §14): its setup and the checks
// before a round, the loop that turns the state machine, and the exit with
// its one bound on the work still running.
#include "agent/group/group_agent.h"

#include <algorithm>

#include "agent/run/attempt_record.h"
#include "agent/config/exit_codes.h"
#include "agent/group/group_agent_impl.h"
#include "agent/run/job_end.h"
#include "agent/run/interruption_history.h"
#include "agent/run/job_start.h"
#include "agent/run/start_watch.h"
#include "agent/repo/repository.h"
#include "agent/trainer/agent_signals.h"
#include "common/log.h"
#include "common/orphan_reaper.h"

namespace sg::group_detail {

AgentResult GroupAgent::Run() {
  if (Status st = Setup(); !st.ok()) {
    LogError("{}", st.message());
    result_.exit_code = exit_code_.value_or(kExitFailure);
    return result_;
  }
  StartWatch watch(c_.clock, [this] { return TakeStopSignal(); }, shell_.monitor(),
                   cfg_.imds.poll_interval);
  std::optional<StartRead> start = ReadStart(watch);
  if (!start) return StoppedAtStart(watch);
  // What the metadata service said meanwhile (a rebalance recommendation)
  // goes to the loop's first look at the news, as one node's start hands it
  // to its policy.
  start_others_ = watch.TakeOthers();
  PerformNode(node_.OnHistoryRead(start->history));
  if (start->complete) {
    result_.exit_code = shell_.EndComplete({cfg_, c_.env, asg_, events_, c_.instance});
    return result_;
  }
  // A job that ran on one node is not silently started over by a group.
  if (const Status& st = start->check; !st.ok()) {
    LogError("{}", st.message());
    result_.exit_code = st.Is(StatusCode::kInvalidArgument) ? kExitUsage : kExitFailure;
    return result_;
  }
  // The ledger's first event of this attempt (docs/operations.md, "The ledger").
  Event("agent-start", AgentStartDetails(c_.identity, c_.launch_time));
  shell_.StartPriceRead();
  // READY=1 comes once this node's part is restored (SayReady).
  shell_.SayStatus("waiting for " + std::to_string(cfg_.nodes) + " members");
  RunNodeLoop(shell_, *this);
  return End();
}

std::optional<GroupAgent::StartRead> GroupAgent::ReadStart(StartWatch& watch) {
  BackgroundCall<StartRead> read(CallRunner(c_.ports));
  read.Start([this] {
    StartRead r;
    auto complete = Repository::Open(c_.store, cfg_.job).IsComplete();
    r.complete = complete.ok() && *complete;
    if (!r.complete) r.check = CheckGroupStart(c_.store, cfg_);
    if (!r.complete && cfg_.checkpoint_cadence.automatic) {
      r.history = ReadInterruptionHistory(c_.store, cfg_.job, c_.clock.Now());
    }
    return r;
  });
  for (;;) {
    if (std::optional<StartRead> r = read.Poll()) return r;
    Idle();
    if (watch.Check()) break;
  }
  // The read still waits for the store, and uses it and the agent.
  threads_left_ = true;
  return std::nullopt;
}

AgentResult GroupAgent::StoppedAtStart(const StartWatch& watch) {
  result_.exit_code = shell_.EndStoppedAtStart(watch, {cfg_, c_.env, asg_, events_, c_.instance});
  result_.abandoned = threads_left_;
  return result_;
}

std::string_view GroupAgent::ExitReason() const {
  if (complete_) return "complete";
  if (notice_read_) return "notice";
  if (node_.leaving() || deadline_) return "signal";
  return exit_code_.value_or(kExitFailure) == kExitFailure ? "failed" : "none";
}

void GroupAgent::Turn(Clock::MonoTime now, TurnNews news) {
  // The store calls' results, in the order the calls were posted.
  calls_.Deliver();
  store_work_.Deliver();  // retention's (nothing to act on)
  if (exit_code_) return;
  Watch(now, std::move(news));
  if (exit_code_) return;
  logs_.Tick(now, phase() == JobPhase::kTraining, log_round_);
  TakePrices();
  metrics_.Tick(c_.clock.Now(), JobPhaseName(phase()));
  Beat(now);
  KeepLease(now);
  Look(now);
  if (exit_code_) return;
  // The node's side, as the node policy decides (agent/group/group_node.cc).
  if (phase() == JobPhase::kRestore) Joining();
  if (phase() == JobPhase::kTraining || phase() == JobPhase::kFinalSnapshot) PollTrainer();
  PollUpload();  // an ended round's result is dropped
  if (!exit_code_) PerformNode(node_.OnTick(Now()));
  if (!exit_code_ && stop_deadline_ != Clock::MonoTime{} && trainer_) Stopping(now);
}

bool GroupAgent::DeliverUntil(LoopCalls& calls, Clock::MonoTime until) {
  calls.Deliver();
  while (calls.pending() > 0 && c_.clock.Monotonic() < until) {
    Idle();
    calls.Deliver();
  }
  return calls.pending() == 0;
}

AgentResult GroupAgent::End() {
  if (trainer_) {
    auto grace = duration_cast<milliseconds>(cfg_.stop_grace);
    if (stop_deadline_ != Clock::MonoTime{}) {
      // Asked to stop already (kStopping): what is left of that grace.
      grace = std::clamp(duration_cast<milliseconds>(stop_deadline_ - c_.clock.Monotonic()),
                         milliseconds(0), grace);
    }
    if (deadline_) {
      // Never past the notice's deadline.
      grace = std::clamp(duration_cast<milliseconds>(*deadline_ - kExitBeforeDeadline - c_.clock.Monotonic()),
                         milliseconds(0), grace);
    }
    if (auto stopped = trainer_->Stop(cfg_.stop_signal, grace); stopped.ok()) {
      LogInfo("the trainer stopped: {}", stopped->ToString());
    }
    trainer_.reset();
  }
  // One bound on the exit for the work still running (the store calls, the
  // upload, the restore, retention), as one node's exit has it (ExitBound):
  // kExitBound in all, and never past a second before a notice's deadline.
  const ExitBound bound(c_.clock, deadline_);
  const Clock::MonoTime until = bound.until();
  auto left = [&] { return bound.left(); };
  const bool upload_left = EndTransfers(until);
  // Prices still being read join the events; after a notice nothing waits.
  TakePrices(deadline_ ? milliseconds(0) : kMetadataPollWait);
  // The ledger's last event of the attempt, as one node's agent records it.
  Event("exit", {{"code", exit_code_.value_or(kExitFailure)}, {"reason", ExitReason()}});
  FlushEvents();
  LeaveMembership();
  calls_.Post([this] {
    if (!lease_.held()) return;
    if (Status st = lease_.Release(); !st.ok()) LogWarn("releasing the lease failed: {}", st.message());
  });
  bool calls_left = !DeliverUntil(calls_, until);
  if (calls_left) LogWarn("store calls still run at the exit (the store does not answer)");
  // On a notice, once the trainer is stopped and the last part is in, as
  // one node's agent does (docs/agent.md, "How it ends"); on_complete once
  // the complete marker is written. Their events go to a store that may not
  // answer: on a thread, within the exit's bound.
  BackgroundCall<bool> duties(c_.ports.inline_store_work);
  duties.Start([this] {
    if (lifecycle_due_) CompleteLifecycleHook({cfg_, c_.env, asg_, events_, c_.instance});
    if (complete_) PerformOnComplete({cfg_, c_.env, asg_, events_, c_.instance});
    return true;
  });
  if (!duties.WaitFor(left())) {
    LogWarn("the Auto Scaling calls at the exit still run");
    calls_left = true;
  }
  shell_.FinishTrainers();
  // An upload given up on, or a log shipment, still runs on its thread and
  // uses the agent and the store: the process ends without destroying them.
  threads_left_ = upload_left || uploader_.left_any() || restore_left_ || calls_left;
  if (!DeliverUntil(store_work_, until)) {
    LogWarn("retention still runs at the exit; it is left to the next coordinator");
    threads_left_ = true;
  }
  if (!logs_.Flush(log_round_, threads_left_, deadline_)) threads_left_ = true;
  if (shell_.FinishReads()) threads_left_ = true;
  metrics_.Tick(c_.clock.Now(), "done", /*force=*/true);
  result_.abandoned = threads_left_;
  result_.exit_code = exit_code_.value_or(kExitFailure);
  return result_;
}

bool GroupAgent::EndTransfers(Clock::MonoTime until) {
  // Waited for turn by turn (Idle), as their runner may be the loop's world.
  bool upload_left = false;
  if (uploader_.busy()) {
    while (!uploader_.Poll() && c_.clock.Monotonic() < until) Idle();
    if (uploader_.busy()) {
      LogWarn("the upload of this node's part still runs at the exit");
      upload_left = true;
    }
  }
  if (restore_.busy()) {
    while (!restore_.Poll() && c_.clock.Monotonic() < until) Idle();
    if (restore_.busy()) {
      LogWarn("the restore of this node's part still runs at the exit");
      restore_left_ = true;
    }
  }
  return upload_left;
}

}  // namespace sg::group_detail

namespace sg {

AgentResult RunGroupAgent(const AgentContext& context) {
  auto agent = std::make_unique<group_detail::GroupAgent>(context);
  AgentResult result = agent->Run();
  // A log shipment given up on still uses the agent: the process ends with it.
  // Calls given to the ports' runner are the caller's: it never runs those
  // left when the agent returns (AgentPorts::loop_calls), so the agent can go.
  if (agent->threads_left() && !context.ports.loop_calls) {
    (void)agent.release();  // NOLINT(bugprone-unused-return-value)
  }
  return result;
}

}  // namespace sg
