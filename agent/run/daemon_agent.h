// The executor of the job policy for one node (docs/design.md §9), the class
// that agent/run/daemon.cc's RunAgent runs: the solo role of the one loop
// (agent/run/node_shell.h). Internal to agent/daemon*.cc: the setup before
// the loop is in daemon_setup.cc, the role's turn and its actions in
// daemon_loop.cc, the run and its end in daemon.cc.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/run/daemon.h"
#include "agent/run/attempt_record.h"
#include "agent/detect/capture.h"
#include "agent/trainer/checkpoint_signal.h"
#include "agent/detect/completion.h"
#include "agent/ledger/events.h"
#include "agent/run/notice_file.h"
#include "agent/config/exit_codes.h"
#include "agent/repo/fencing.h"
#include "agent/trainer/host_lock.h"
#include "agent/run/instance_prices.h"
#include "agent/run/interruption_monitor.h"
#include "agent/run/metadata_poll.h"
#include "agent/run/node_shell.h"
#include "agent/run/job_end.h"
#include "agent/logs/job_logs.h"
#include "agent/run/job_policy.h"
#include "agent/run/job_ports_real.h"
#include "agent/run/job_start.h"
#include "agent/repo/lease.h"
#include "agent/logs/log_store.h"
#include "agent/detect/presets.h"
#include "agent/run/resume_guard.h"
#include "agent/repo/repository.h"
#include "agent/repo/retention.h"
#include "agent/run/retry_budget.h"
#include "agent/repo/open_store.h"
#include "agent/repo/snapshot_writer.h"
#include "agent/run/start_watch.h"
#include "agent/repo/store_names.h"
#include "agent/trainer/supervisor.h"
#include "agent/run/suspect.h"
#include "agent/trainer/trainer_record.h"
#include "agent/trainer/trainer_tail.h"
#include "common/background_call.h"
#include "common/background_queue.h"
#include "common/files.h"
#include "common/log.h"
#include "common/orphan_reaper.h"
#include "common/signal_names.h"

namespace sg::daemon_detail {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The wait for the ledger's events when the start ended early (Agent::Run).
constexpr auto kLedgerWait = milliseconds(5'000);

// The solo role of the one loop (agent/run/node_shell.h): the lease, the
// fence and the job policy around one trainer.
class Agent final : public NodeRole {
 public:
  explicit Agent(const AgentContext& c)
      : c_(c),
        cfg_(c.config),
        events_(c.store, c.clock, cfg_.job, c.instance),
        lease_(c.lease_store ? *c.lease_store : c.store, c.clock, cfg_.job, c.instance,
               LeaseOptions{cfg_.lease.heartbeat, cfg_.lease.timeout}),
        notice_file_(NoticeFilePath(cfg_)),
        policy_(JobPolicyOptions::FromConfig(cfg_)),
        launcher_(cfg_, c.env, notice_file_, TrainerRecordPath(cfg_.checkpoint_dir)),
        uploader_([this](const Checkpoint& ck,
                         const std::atomic<bool>* cancel) { return Upload(ck, cancel); },
                  c.clock),
        autoscaling_(c.aws, c.clock),
        signal_target_(CheckpointSignalTarget(cfg_.command)) {}

  AgentResult Run();
  AgentResult RunJob();  // Run, before the wait for the ledger's events
  // Threads of this agent were left running at the exit (EndBackgroundWork).
  bool threads_left() const { return threads_left_; }

 private:
  // NodeRole
  bool done() const override { return done_; }
  Trainer* trainer() override { return trainer_.get(); }
  CheckpointSource* checkpoints() override { return checkpoints_; }
  void Turn(Clock::MonoTime now, TurnNews news) override;

  // Setup, before the loop.
  // True when a stop signal arrived; the signals to forward go to the trainer.
  bool SignalPending() { return shell_.TakeStopSignal(trainer_.get()); }
  // Records this generation's fence (agent/repo/fencing.h). REQUIRES: the lease.
  Status DrawFence(uint64_t newest_seq);
  Status Prepare();  // staging, checkpoint source
  // The start (agent/run/job_start.h) on a thread of its own, watched by `watch`
  // on this one; a stop cancels it (docs/design.md §9, "The start").
  JobStart RunStart(StartWatch& watch);
  void WaitAtStart();
  // The instance's prices (agent/run/instance_prices.h): read once, off
  // the loop (NodeShell), and recorded when read; `wait` bounds a wait for them.
  void TakePrices(std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // A stop before the trainer started: nothing changed, exit 75.
  AgentResult StoppedAtStart(const StartWatch& watch);
  // A failure at start. Once the lease is held it is released, so the next
  // agent need not wait lease.timeout for an agent that never worked.
  AgentResult Fail(const Status& st, int exit_code = kExitFailure);
  // From a start that restored the job: the trainer, the loop, the end.
  AgentResult Train(const JobStart& start, StartWatch& watch);
  void ReleaseLeaseNow();

  // Uploads `checkpoint` now (capture, snapshot, commit). REQUIRES: the lease.
  StatusOr<SnapshotResult> Upload(const Checkpoint& checkpoint, const std::atomic<bool>* cancel);
  Status RenewLease();

  // The loop's actions.
  PolicyTime Now() const { return {c_.clock.Monotonic(), c_.clock.Now()}; }
  void Perform(JobActions actions);
  JobActions Do(const JobAction& action);
  JobActions StartTrainer(const job_action::StartTrainer& a);
  JobActions FindCheckpoints();
  // The trainer ended: a snapshot it cannot resume from is marked suspect
  // and the newest one that is not is restored (agent/run/suspect.h), off
  // the loop: a restore of many gigabytes must not hold the watchdog, the
  // signals or the notices. The policy hears of the exit once it is done
  // (TakeFallback, then TellExit), as if it had been done at once: it takes
  // the older snapshot and its restart budget first, then decides the restart.
  void CheckResume(const ExitStatus& ended);
  void TakeFallback();
  void TellExit();
  // Why an exit 0 does not complete the job (complete_when); nullopt if it does.
  std::optional<std::string> Unearned(const ExitStatus& ended);
  void Finish(int exit_code);
  // Waits, within kExitBound, for the upload, the renewal and the store work
  // still running; what does not end in time is abandoned (AgentResult).
  void EndBackgroundWork();
  // The last log segments, after the final snapshot (docs/design.md §13).
  void FlushLogs();
  uint64_t NewestBytes();
  std::optional<Checkpoint> NewestLocal();
  JobEndContext EndContext() { return {cfg_, c_.env, autoscaling(), events_, c_.instance}; }

  TrainerLauncher& launcher() { return c_.ports.trainer ? *c_.ports.trainer : launcher_; }
  SnapshotUploader& uploader() { return c_.ports.uploader ? *c_.ports.uploader : uploader_; }
  AutoScalingApi& autoscaling() {
    return c_.ports.autoscaling ? *c_.ports.autoscaling : autoscaling_;
  }

  const AgentContext& c_;
  const Config& cfg_;
  NodeShell shell_{c_};
  EventLog events_;
  std::mutex lease_mu_;
  LeaseKeeper lease_;
  const std::string notice_file_;
  JobPolicy policy_;
  ProcessTrainerLauncher launcher_;
  ThreadUploader uploader_;
  LazyAutoScaling autoscaling_;
  const SignalTarget signal_target_;   // where checkpoint_signal goes
  std::string staging_root_;
  std::unique_ptr<CheckpointSource> own_checkpoints_;
  CheckpointSource* checkpoints_ = nullptr;
  std::optional<StartWatch> watch_;  // for the start, before the loop
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<Trainer> finished_trainer_;  // exited 0; kept until the end

  std::string resume_;  // what the trainer is (re)started from; "" = fresh
  std::optional<uint64_t> resume_seq_;  // the snapshot resume_ is, if any
  bool resume_fixed_ = false;           // a fall back chose resume_: the restart takes it
  ResumeGuard guard_{cfg_.resume.max_failures};
  BackgroundCall<StatusOr<StartPoint>> fallback_{c_.ports.inline_store_work};  // CheckResume's
  uint64_t fallback_seq_ = 0;                              // the suspect snapshot it falls back from
  struct TrainerExit {
    ExitStatus status;
    std::optional<std::string> unearned;  // why an exit 0 does not complete the job
  };
  std::optional<TrainerExit> exit_to_tell_;  // the policy's, after the fall back
  TrainerTail tail_;  // the trainer's last lines, for a suspect mark

  JobLogs logs_{cfg_, c_.store, c_.clock, c_.instance, c_.ports.inline_store_work};

  BackgroundCall<Status> renewal_{c_.ports.inline_store_work};  // the renewal in flight
  BackgroundQueue store_work_{c_.ports.inline_store_work};      // events, retention, the release
  MetricsFile metrics_{cfg_.metrics_file, cfg_.job, events_.attempt_id()};
  AttemptRecorder attempt_{events_, store_work_, c_.clock, metrics_};  // every event goes here
  bool done_ = false;
  bool threads_left_ = false;
  std::atomic<uint64_t> generation_{0};  // the lease's, once taken
  AgentResult result_;
};

}  // namespace sg::daemon_detail
