// The one-node executor's setup before its loop (docs/design.md §9): signals,
// the fence, the start on a thread of its own, a stop before the trainer
// started, and the upload every snapshot goes through.
#include "agent/run/daemon_agent.h"

#include <unistd.h>

namespace sg::daemon_detail {

Status Agent::DrawFence(uint64_t newest_seq) {
  {
    // Fixed from now on: uploads read it without waiting on a renewal.
    std::lock_guard<std::mutex> lock(lease_mu_);
    generation_ = lease_.generation();
  }
  return DrawFenceAfter(c_.store, cfg_.job, generation_, newest_seq, c_.instance,
                        FormatUtc(c_.clock.Now(), true))
      .status();
}

Status Agent::Prepare() {
  SG_ASSIGN_OR_RETURN(LoopParts parts, PrepareLoopParts(c_));
  staging_root_ = std::move(parts.staging_root);
  own_checkpoints_ = std::move(parts.own_checkpoints);
  checkpoints_ = parts.checkpoints;
  return Status::Ok();  // the monitor was made at start (NodeShell::Begin)
}

void Agent::WaitAtStart() {
  TakePrices();
  shell_.Idle(nullptr);
}

void Agent::TakePrices(std::chrono::milliseconds wait) {
  std::optional<InstancePriceRead::Result> read = shell_.TakePrices(wait);
  if (!read) return;
  // At the time the reads began: a late answer never lengthens the attempt.
  attempt_.Record("prices", std::move(read->details), read->began);
}

JobStart Agent::RunStart(StartWatch& watch) {
  StartSteps steps{cfg_,        c_.store,    c_.clock,   events_,
                   lease_,      lease_mu_,   c_.notifier, c_.instance,
                   [this](uint64_t newest_seq) { return DrawFence(newest_seq); },
                   /*stopped=*/{},
                   /*cancel=*/nullptr};  // both set by RunWatchedStart
  // Tests on a fake clock run the start on this thread, between whose steps
  // it looks for a stop itself.
  const auto give_up_after =
      std::max<std::chrono::milliseconds>(cfg_.stop_timeout - seconds(10), seconds(1));
  std::optional<JobStart> start = RunWatchedStart(steps, watch, c_.ports.inline_store_work,
                                                  [this] { WaitAtStart(); }, give_up_after);
  if (start) return std::move(*start);
  LogError("the start did not end within {} s of the stop; leaving it",
           duration_cast<seconds>(give_up_after).count());
  result_.abandoned = threads_left_ = true;
  JobStart stopped;
  stopped.outcome = JobStart::Outcome::kStopped;
  return stopped;
}

void Agent::ReleaseLeaseNow() {
  std::lock_guard<std::mutex> lock(lease_mu_);
  if (!lease_.held()) return;
  if (Status st = lease_.Release(); !st.ok()) {
    LogWarn("releasing the lease failed: {}", st.message());
  }
}

AgentResult Agent::StoppedAtStart(const StartWatch& watch) {
  result_.exit_code = shell_.EndStoppedAtStart(watch, EndContext(), [&] {
    // A start left running may still be taking the lease: not touched then.
    if (result_.abandoned || !lease_.held()) return;
    const std::optional<InterruptionEvent>& notice = watch.notice();
    nlohmann::ordered_json data = {{"reason", notice ? "notice" : "signal"}, {"during", "start"}};
    if (notice) data["notice"] = notice->ToJson();
    events_.Note("stop", data);
    // The ledger's end of this attempt (docs/operations.md, "The ledger").
    events_.Note("exit", {{"code", kExitInterrupted}, {"reason", data["reason"]}});
  });
  FlushLogs();
  if (!result_.abandoned) ReleaseLeaseNow();
  return result_;
}

Status Agent::RenewLease() {
  std::lock_guard<std::mutex> lock(lease_mu_);
  return lease_.Renew();
}

StatusOr<SnapshotResult> Agent::Upload(const Checkpoint& checkpoint,
                                       const std::atomic<bool>* cancel) {
  SG_ASSIGN_OR_RETURN(CapturedCheckpoint capture,
                      CapturedCheckpoint::Capture(cfg_.checkpoint_dir, checkpoint, staging_root_));
  SnapshotRequest request;
  request.preset = std::string(PresetName(cfg_.preset));
  request.instance = c_.instance;
  request.index = cfg_.index;
  request.attempt = cfg_.engine_attempt;
  request.generation = generation_;
  request.cancel = cancel;
  // The writer has verified the capture by then. Fencing: the commit
  // follows a successful renewal, well inside the lease timeout, so no
  // successor can have taken the job meanwhile.
  request.verify_before_commit = [&]() -> Status { return RenewLease(); };
  return Repository::Open(c_.store, cfg_.job)
      .Write(c_.clock, SnapshotOptionsOf(cfg_), capture, request);
}

}  // namespace sg::daemon_detail
