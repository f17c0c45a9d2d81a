// RunAgent: runs one node's job (docs/design.md §9) with the executor of
// agent/run/daemon_agent.h, from its setup to its exit and the wait for the work
// still on the store.
#include "agent/run/daemon.h"

#include <unistd.h>

#include <algorithm>

#include "agent/run/daemon_agent.h"

namespace sg {
namespace daemon_detail {

void Agent::EndBackgroundWork() {
  // One bound for all of it (ExitBound, as a member's exit has): a fall
  // back's restore still running takes its share first.
  const ExitBound bound(c_.clock, policy_.deadline());
  bool fallback_left = false;
  if (fallback_.busy() && !fallback_.WaitFor(bound.left())) {
    LogError("the restore of the fall back still runs at the exit; leaving it behind");
    fallback_left = true;
  }
  const LeftBehind left = EndStoreWork(uploader(), renewal_, store_work_, bound);
  result_.abandoned = left.any || fallback_left;
  threads_left_ = left.threads || fallback_left ||
                  (c_.ports.uploader == nullptr && uploader_.left_any());
}

void Agent::FlushLogs() {
  if (!logs_.Flush(generation_, result_.abandoned, policy_.deadline())) {
    result_.abandoned = true;  // a shipment still uses the agent: the process ends with it
    threads_left_ = true;
  }
}

void Agent::Finish(int exit_code) {
  done_ = true;
  result_.exit_code = exit_code;
  attempt_.Record("exit", {{"code", exit_code}, {"reason", JobEndName(policy_.end())}});
  metrics_.Tick(c_.clock.Now(), "done", /*force=*/true);
  if (auto n = policy_.notice_to_commit()) result_.notice_to_commit_seconds = *n;
  result_.committed_step = policy_.committed_step_this_run();
  // The newest step the trainer wrote a checkpoint for, complete or not.
  result_.local_step = NewestStepWritten(cfg_.checkpoint_dir);
}

AgentResult Agent::Run() {
  AgentResult result = RunJob();
  // Prices that came after the loop (a short job) join the ledger's events;
  // after a notice nothing waits for them. Reads still running use their
  // clients: left to end with the process.
  TakePrices(result.abandoned || policy_.deadline() ? milliseconds(0) : kMetadataPollWait);
  // A start that ended early (a failure, a stop, a complete job) may leave
  // the ledger's first events on the store-work queue, whose tasks use the
  // agent: waited for briefly; what still runs keeps the agent (RunAgent
  // leaves it) and ends with the process.
  if (!result.abandoned && !store_work_.DrainFor(kLedgerWait)) {
    LogWarn("the ledger's events still wait for the store; leaving them behind");
    threads_left_ = true;
    result.abandoned = true;
  }
  if (shell_.FinishReads()) {
    threads_left_ = true;
    result.abandoned = true;
  }
  return result;
}

AgentResult Agent::RunJob() {
  if (std::optional<NodeShell::Failure> failed = shell_.Begin(events_)) {
    return Fail(failed->status, failed->exit_code);
  }
  // After the signals are blocked: the first task starts the store-work
  // thread, which inherits the mask (a SIGTERM must not end it).
  attempt_.Record("agent-start", AgentStartDetails(c_.identity, c_.launch_time));
  shell_.StartPriceRead();
  // Only the agent holding the checkpoint dir writes beside it.
  logs_.Open(c_.env);
  launcher_.set_output(tail_.Wrap(logs_.TrainerSink()));
  // A member: a start left running still uses it.
  StartWatch& watch = watch_.emplace(c_.clock, [this] { return SignalPending(); },
                                     shell_.monitor(), cfg_.imds.poll_interval);
  JobStart start = RunStart(watch);
  if (start.outcome == JobStart::Outcome::kFailed) {
    if (start.exit_code == kExitInterrupted) {
      LogError("the store did not answer for {} s at start; nothing was changed, exiting {} so "
               "that the job is run again",
               duration_cast<seconds>(kStartRetryBound).count(), kExitInterrupted);
    }
    return Fail(start.status, start.exit_code);
  }
  if (start.outcome == JobStart::Outcome::kComplete) {
    result_.exit_code = shell_.EndComplete(EndContext());
    return result_;
  }
  if (start.outcome == JobStart::Outcome::kStopped || watch.stopped()) {
    return StoppedAtStart(watch);
  }
  return Train(start, watch);
}

AgentResult Agent::Fail(const Status& st, int exit_code) {
  LogError("{}", st.message());
  FlushLogs();
  ReleaseLeaseNow();
  result_.exit_code = exit_code;
  return result_;
}

AgentResult Agent::Train(const JobStart& start, StartWatch& watch) {
  (void)policy_.OnLeaseAcquired(Now());
  // The start ran on a thread of its own: its moments are recorded now,
  // each with the time it happened (the ledger's, docs/operations.md).
  attempt_.Record("lease", {}, start.leased_at);
  attempt_.Record("restore-start", {}, start.restore_started_at);
  attempt_.Record("restore-end", {{"step", start.point.resumed_step
                                               ? nlohmann::ordered_json(*start.point.resumed_step)
                                               : nlohmann::ordered_json(nullptr)}},
                  start.restore_ended_at);
  result_.resumed_step = start.point.resumed_step;
  result_.restore_seconds = start.point.restore_seconds;
  resume_ = start.point.state.resume;
  if (!start.point.state.upload_first && !resume_.empty()) resume_seq_ = start.point.state.last_seq;
  if (Status st = Prepare(); !st.ok()) return Fail(st);
  shell_.SayReady();
  shell_.SayStatus("training");
  Perform(policy_.OnRestored(Now(), start.point.state));
  // What the metadata service said during the start (a rebalance
  // recommendation, ...), now that the trainer runs.
  for (const InterruptionEvent& e : watch.TakeOthers()) {
    Perform(policy_.OnInterruption(Now(), e, 0));
  }
  RunNodeLoop(shell_, *this);
  EndBackgroundWork();
  trainer_.reset();
  finished_trainer_.reset();
  shell_.FinishTrainers();
  // After the final snapshot's commit (the loop ends on Exit) and after the
  // trainer's last lines were read: never before (docs/design.md §13).
  FlushLogs();
  return result_;
}

}  // namespace daemon_detail

std::string NoticeFilePath(const Config& config) {
  return DirName(config.checkpoint_dir) + "/.spotguard-notice-" + config.job + ".json";
}

AgentResult RunAgent(const AgentContext& context) {
  auto agent = std::make_unique<daemon_detail::Agent>(context);
  AgentResult result = agent->Run();
  // Work given up on still runs on its threads and uses the agent: leave
  // the agent to it; the caller ends the process.
  if (agent->threads_left()) (void)agent.release();  // NOLINT(bugprone-unused-return-value)
  return result;
}

}  // namespace sg
