// The executor of the job policy (docs/design.md §9): the setup before the
// loop (host lock, lease, fence, restore), then a loop that turns what it
// sees into observations for JobPolicy (agent/job_policy.h) and performs the
// actions the policy answers with. Every decision is the policy's.
#include "agent/daemon.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <filesystem>
#include <mutex>

#include "agent/attempt_record.h"
#include "agent/capture.h"
#include "agent/checkpoint_signal.h"
#include "agent/completion.h"
#include "agent/events.h"
#include "agent/notice_file.h"
#include "agent/exit_codes.h"
#include "agent/fencing.h"
#include "agent/host_lock.h"
#include "agent/interruption_monitor.h"
#include "agent/job_end.h"
#include "agent/job_logs.h"
#include "agent/job_policy.h"
#include "agent/job_ports_real.h"
#include "agent/job_start.h"
#include "agent/lease.h"
#include "agent/log_store.h"
#include "agent/presets.h"
#include "agent/resume_guard.h"
#include "agent/retention.h"
#include "agent/retry_budget.h"
#include "agent/snapshot_commands.h"
#include "agent/snapshot_writer.h"
#include "agent/start_watch.h"
#include "agent/store_layout.h"
#include "agent/supervisor.h"
#include "agent/suspect.h"
#include "agent/trainer_record.h"
#include "agent/trainer_tail.h"
#include "common/background_call.h"
#include "common/background_queue.h"
#include "common/files.h"
#include "common/log.h"
#include "common/orphan_reaper.h"
#include "common/signal_names.h"

namespace sg {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kTick = milliseconds(100);
// The exit's wait for work on the store (docs/agent.md, "How it ends").
constexpr auto kExitWait = milliseconds(15'000);
// The wait for the ledger's events when the start ended early (Agent::Run).
constexpr auto kLedgerWait = milliseconds(5'000);

class Agent {
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
  // Setup, before the loop.
  Status BlockSignals();
  // True when a stop signal arrived; the signals to forward go to the trainer.
  bool SignalPending();
  void Forward(int signo);
  // Records this generation's fence (agent/fencing.h). REQUIRES: the lease.
  Status DrawFence();
  Status Prepare();  // staging, checkpoint source
  // The start (agent/job_start.h) on a thread of its own, watched by `watch`
  // on this one; a stop cancels it (docs/design.md §9, "The start").
  JobStart RunStart(StartWatch& watch);
  void WaitAtStart();
  // A stop before the trainer started: nothing changed, exit 75.
  AgentResult StoppedAtStart(const StartWatch& watch);
  void ReleaseLeaseNow();

  // Uploads `checkpoint` now (capture, snapshot, commit). REQUIRES: the lease.
  StatusOr<SnapshotResult> Upload(const Checkpoint& checkpoint, const std::atomic<bool>* cancel);
  Status RenewLease();

  // The loop and the actions.
  void Loop();
  PolicyTime Now() const { return {c_.clock.Monotonic(), c_.clock.Now()}; }
  void Idle();
  void Perform(JobActions actions);
  JobActions Do(const JobAction& action);
  JobActions StartTrainer(const job_action::StartTrainer& a);
  JobActions FindCheckpoints();
  // The trainer ended: a snapshot it cannot resume from is marked suspect
  // and the newest one that is not is restored (agent/suspect.h).
  void CheckResume(const ExitStatus& ended);
  // Why an exit 0 does not complete the job (complete_when); nullopt if it does.
  std::optional<std::string> Unearned(const ExitStatus& ended);
  void Finish(int exit_code);
  // Waits, within kExitWait, for the upload, the renewal and the store work
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
  EventLog events_;
  std::mutex lease_mu_;
  LeaseKeeper lease_;
  const std::string notice_file_;
  JobPolicy policy_;
  ProcessTrainerLauncher launcher_;
  ThreadUploader uploader_;
  LazyAutoScaling autoscaling_;
  const SignalTarget signal_target_;   // where checkpoint_signal goes
  std::optional<HostLock> host_lock_;  // held for the whole run
  std::string staging_root_;
  UniqueFd signal_fd_;
  std::unique_ptr<CheckpointSource> own_checkpoints_;
  CheckpointSource* checkpoints_ = nullptr;
  std::unique_ptr<InterruptionMonitor> monitor_;
  std::optional<StartWatch> watch_;  // for the start, before the loop
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<Trainer> finished_trainer_;  // exited 0; kept until the end

  std::string resume_;  // what the trainer is (re)started from; "" = fresh
  std::optional<uint64_t> resume_seq_;  // the snapshot resume_ is, if any
  bool resume_fixed_ = false;           // a fall back chose resume_: the restart takes it
  ResumeGuard guard_{cfg_.resume.max_failures};
  TrainerTail tail_;  // the trainer's last lines, for a suspect mark

  JobLogs logs_{cfg_, c_.store, c_.clock, c_.instance, c_.ports.inline_store_work};

  BackgroundCall<Status> renewal_{c_.ports.inline_store_work};  // the renewal in flight
  BackgroundQueue store_work_{c_.ports.inline_store_work};      // events, retention, the release
  MetricsFile metrics_{cfg_.metrics_file, cfg_.job, events_.attempt_id()};
  AttemptRecorder attempt_{events_, store_work_, c_.clock, metrics_};  // every event goes here
  Clock::MonoTime next_poll_{};
  WatchdogPinger watchdog_{c_.notifier};
  bool done_ = false;
  bool threads_left_ = false;
  const bool pid1_ = ::getpid() == 1;    // the first process of a PID namespace
  std::atomic<uint64_t> generation_{0};  // the lease's, once taken
  AgentResult result_;
};

Status Agent::BlockSignals() {
  if (c_.ports.stop_requested) return Status::Ok();
  SG_ASSIGN_OR_RETURN(signal_fd_, BlockStopSignals());
  return Status::Ok();
}

bool Agent::SignalPending() {
  if (c_.ports.stop_requested) return c_.ports.stop_requested();
  ArrivedSignals arrived = ReadArrivedSignals(signal_fd_.get());
  for (int signo : arrived.forward) Forward(signo);
  return arrived.stop;
}

void Agent::Forward(int signo) {
  if (!trainer_ || !trainer_->running()) {
    LogWarn("received {}; no trainer runs to forward it to", SignalName(signo));
    return;
  }
  if (Status st = trainer_->Signal(signo); st.ok()) {
    LogInfo("received {}; forwarded it to the trainer", SignalName(signo));
  } else {
    LogWarn("received {}; forwarding it to the trainer failed: {}", SignalName(signo),
            st.message());
  }
}

Status Agent::DrawFence() {
  {
    // Fixed from now on: uploads read it without waiting on a renewal.
    std::lock_guard<std::mutex> lock(lease_mu_);
    generation_ = lease_.generation();
  }
  return sg::DrawFence(c_.store, cfg_.job, generation_, c_.instance,
                       FormatUtc(c_.clock.Now(), true))
      .status();
}

Status Agent::Prepare() {
  SG_ASSIGN_OR_RETURN(LoopParts parts, PrepareLoopParts(c_));
  staging_root_ = std::move(parts.staging_root);
  own_checkpoints_ = std::move(parts.own_checkpoints);
  checkpoints_ = parts.checkpoints;
  return Status::Ok();  // the monitor was made at start (Run)
}

void Agent::WaitAtStart() {
  if (c_.ports.idle) {
    c_.ports.idle(kTick);
    return;
  }
  pollfd fd{signal_fd_.get(), POLLIN, 0};
  ::poll(&fd, 1, static_cast<int>(kTick.count()));
  if (pid1_) ReapOrphanedChildren();
}

JobStart Agent::RunStart(StartWatch& watch) {
  StartSteps steps{cfg_,        c_.store,    c_.clock,   events_,
                   lease_,      lease_mu_,   c_.notifier, c_.instance,
                   [this] { return DrawFence(); },
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
  (void)c_.notifier.Notify("STOPPING=1");
  const std::optional<InterruptionEvent>& notice = watch.notice();
  LogInfo(
      "stopped on {} before the trainer started: {} was left as it was and the store holds "
      "every snapshot; exiting {}",
      notice ? "the interruption notice" : "a stop signal", cfg_.checkpoint_dir, kExitInterrupted);
  // A start left running may still be taking the lease: not touched then.
  if (!result_.abandoned && lease_.held()) {
    nlohmann::ordered_json data = {{"reason", notice ? "notice" : "signal"}, {"during", "start"}};
    if (notice) data["notice"] = notice->ToJson();
    events_.Note("stop", data);
    // The ledger's end of this attempt (docs/operations.md, "The ledger").
    events_.Note("exit", {{"code", kExitInterrupted}, {"reason", data["reason"]}});
  }
  if (notice) CompleteLifecycleHook(EndContext());
  FlushLogs();
  if (!result_.abandoned) ReleaseLeaseNow();
  result_.exit_code = kExitInterrupted;  // not done, nothing lost: run it again
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
  request.job = cfg_.job;
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
  SnapshotWriter writer(c_.store, c_.clock, SnapshotOptionsOf(cfg_));
  return writer.Write(capture, request);
}

std::optional<Checkpoint> Agent::NewestLocal() {
  auto all = checkpoints_->Complete();
  if (!all.ok() || all->empty()) return std::nullopt;
  return all->front();
}

uint64_t Agent::NewestBytes() {
  std::optional<Checkpoint> newest = NewestLocal();
  return newest ? CheckpointBytes(cfg_.checkpoint_dir, *newest) : 0;
}

void Agent::Idle() {
  if (c_.ports.idle) {
    c_.ports.idle(kTick);
    return;
  }
  pollfd fds[2] = {{signal_fd_.get(), POLLIN, 0}, {checkpoints_->fd(), POLLIN, 0}};
  ::poll(fds, 2, static_cast<int>(kTick.count()));
  // PID 1 of a container inherits every orphan (docs/design.md §11).
  if (pid1_) ReapOrphanedChildren();
}

void Agent::Loop() {
  const auto now0 = c_.clock.Monotonic();
  next_poll_ = now0;
  while (!done_) {
    Idle();
    if (SignalPending()) Perform(policy_.OnStopSignal(Now()));
    if (done_) break;
    checkpoints_->Poll();
    const auto now = c_.clock.Monotonic();
    watchdog_.Tick(now);
    // The renewal runs on a thread of its own: a request that hangs must
    // not keep the loop from the metadata service (docs/design.md §9).
    if (renewal_.busy()) {
      if (std::optional<Status> st = renewal_.Poll()) {
        if (st->reason() == "Fenced") {
          Perform(policy_.OnFenced(Now(), std::string(st->message())));
        } else if (!st->ok()) {
          LogWarn("renewing the lease failed (will retry): {}", st->message());
        }
      }
    } else if (std::unique_lock<std::mutex> lock(lease_mu_, std::try_to_lock);
               lock.owns_lock() && lease_.held() && lease_.RenewalDue()) {
      lock.unlock();
      renewal_.Start([this] { return RenewLease(); });
    }
    if (done_) break;
    if (uploader().busy()) {
      if (auto r = uploader().Poll()) Perform(policy_.OnUploadFinished(Now(), OutcomeOf(*r)));
    }
    if (done_) break;
    logs_.Tick(now, policy_.phase() == JobPhase::kTraining, generation_);
    if (monitor_ && now >= next_poll_) {
      next_poll_ = now + cfg_.imds.poll_interval;
      for (const InterruptionEvent& e : monitor_->PollOnce()) {
        Perform(policy_.OnInterruption(Now(), e, e.IsNotice() ? NewestBytes() : 0));
        if (done_) break;
      }
    }
    if (done_) break;
    if (trainer_) {
      if (auto ended = trainer_->Poll()) {
        const std::optional<std::string> unearned = Unearned(*ended);
        if (ended->success() && !unearned) {
          finished_trainer_ = std::move(trainer_);
        } else {
          trainer_.reset();
        }
        CheckResume(*ended);
        Perform(policy_.OnTrainerExited(Now(), *ended, unearned));
      }
    }
    if (done_) break;
    Perform(policy_.OnTick(Now()));
    metrics_.Tick(c_.clock.Now(), JobPhaseName(policy_.phase()));
  }
}

void Agent::Perform(JobActions actions) {
  std::deque<JobAction> queue(std::make_move_iterator(actions.begin()),
                              std::make_move_iterator(actions.end()));
  while (!queue.empty()) {
    const JobAction action = std::move(queue.front());
    queue.pop_front();
    for (JobAction& next : Do(action)) queue.push_back(std::move(next));
  }
}

JobActions Agent::Do(const JobAction& action) {
  namespace a = job_action;
  if (const auto* log = std::get_if<a::Log>(&action)) {
    WriteToLog(*log);
  } else if (const auto* notify = std::get_if<a::Notify>(&action)) {
    (void)c_.notifier.Notify(notify->state);
  } else if (const auto* start = std::get_if<a::StartTrainer>(&action)) {
    return StartTrainer(*start);
  } else if (std::holds_alternative<a::SignalTrainer>(action)) {
    if (cfg_.checkpoint_signal && trainer_ && trainer_->running()) {
      (void)SendCheckpointSignal(*trainer_, *cfg_.checkpoint_signal, signal_target_);
    }
  } else if (std::holds_alternative<a::FindCheckpoints>(action)) {
    return FindCheckpoints();
  } else if (const auto* upload = std::get_if<a::StartUpload>(&action)) {
    uploader().Start(upload->checkpoint);
  } else if (std::holds_alternative<a::CancelUpload>(action)) {
    if (uploader().busy()) uploader().Cancel();
  } else if (const auto* notice = std::get_if<a::WriteNoticeFile>(&action)) {
    if (Status st = WriteNoticeFile(notice_file_, NoticeFileJson(notice->event)); !st.ok()) {
      LogWarn("writing the notice file failed: {}", st.message());
    }
  } else if (const auto* stop = std::get_if<a::StopTrainer>(&action)) {
    if (trainer_ && trainer_->running() && !trainer_->Poll()) {
      auto stopped = trainer_->Stop(cfg_.stop_signal, stop->grace);
      if (stopped.ok()) LogInfo("the trainer stopped: {}", stopped->ToString());
    }
    return policy_.OnTrainerStopped(Now());
  } else if (const auto* event = std::get_if<a::RecordEvent>(&action)) {
    attempt_.Record(event->kind, event->data, event->at);
  } else if (std::holds_alternative<a::RunRetention>(action)) {
    store_work_.Post([this] {
      auto gc = CollectGarbage(c_.store, c_.clock, cfg_.job, GcOptions{.keep = cfg_.keep});
      if (!gc.ok()) LogWarn("retention failed: {}", gc.status().message());
      // The logs of old attempts go with them (logs_keep, docs/design.md §13).
      auto logs = PruneLogs(c_.store, cfg_.job, cfg_.logs_keep);
      if (!logs.ok()) LogWarn("log retention failed: {}", logs.status().message());
    });
  } else if (std::holds_alternative<a::CompleteLifecycleHook>(action)) {
    CompleteLifecycleHook(EndContext());
  } else if (const auto* marker = std::get_if<a::WriteCompleteMarker>(&action)) {
    sg::WriteCompleteMarker(c_.store, c_.clock, events_, cfg_.job, c_.instance, marker->seq,
                            marker->step);
  } else if (std::holds_alternative<a::PerformOnComplete>(action)) {
    PerformOnComplete(EndContext());
  } else if (std::holds_alternative<a::ReleaseLease>(action)) {
    store_work_.Post([this] {
      std::lock_guard<std::mutex> lock(lease_mu_);
      if (!lease_.held()) return;
      if (Status st = lease_.Release(); !st.ok()) {
        LogWarn("releasing the lease failed: {}", st.message());
      }
    });
  } else if (const auto* exit = std::get_if<a::Exit>(&action)) {
    Finish(exit->code);
  }
  return {};
}

JobActions Agent::StartTrainer(const job_action::StartTrainer& a) {
  if (a.resume_from_newest_local && !resume_fixed_) {
    if (std::optional<Checkpoint> newest = NewestLocal()) {
      resume_ = cfg_.checkpoint_dir + "/" + newest->resume;
      // Not newer than the store's newest: a resume from that snapshot.
      const auto& mark = policy_.committed();
      resume_seq_ = mark && !IsNewerThan(*newest, *mark) ? policy_.last_seq() : std::nullopt;
    }
  }
  resume_fixed_ = false;
  guard_.Started(resume_seq_, policy_.committed());
  auto trainer = launcher().Start(TrainerLaunch{resume_, a.attempt, std::nullopt});
  if (!trainer.ok()) return policy_.OnTrainerStartFailed(Now(), trainer.status().message());
  trainer_ = std::move(*trainer);
  return {};
}

JobActions Agent::FindCheckpoints() {
  // Once the job is ending, what the trainer wrote is taken as soon as it is
  // closed and quiet, not after the whole settle time (docs/checkpoints.md).
  checkpoints_->SetUrgent(policy_.phase() == JobPhase::kFinalSnapshot ||
                          policy_.phase() == JobPhase::kStopping);
  auto all = checkpoints_->Complete();
  if (!all.ok()) {
    LogWarn("looking for checkpoints failed: {}", all.status().message());
    return policy_.OnCheckpoints(Now(), {}, std::nullopt);
  }
  return policy_.OnCheckpoints(Now(), *all, checkpoints_->NextSettle(), checkpoints_->Writing());
}

std::optional<std::string> Agent::Unearned(const ExitStatus& ended) {
  if (!ended.success() || !cfg_.complete_when) return std::nullopt;
  const std::optional<std::string>& file = cfg_.complete_when->file_exists;
  std::error_code ec;
  const bool present = file && std::filesystem::exists(cfg_.checkpoint_dir + "/" + *file, ec);
  return UnmetCompletion(*cfg_.complete_when, NewestStepWritten(cfg_.checkpoint_dir), present);
}

void Agent::CheckResume(const ExitStatus& ended) {
  std::optional<SuspectVerdict> verdict = guard_.Exited(ended, NewestLocal());
  if (!verdict) return;
  const SuspectRecord record{verdict->seq, FormatUtc(c_.clock.Now(), true), c_.instance, resume_,
                             verdict->exits, tail_.Lines()};
  auto start = FallBackFromSuspect(c_.store, c_.clock, cfg_, events_, record);
  if (!start.ok()) {
    LogError("falling back from suspect snapshot {} failed: {}", SeqName(verdict->seq),
             start.status().message());
    return;
  }
  resume_ = start->state.resume;
  resume_seq_ = start->state.upload_first || resume_.empty() ? std::nullopt : start->state.last_seq;
  resume_fixed_ = true;
  // The restore swapped the checkpoint dir: watch the new one.
  if (own_checkpoints_) {
    if (auto watched = WatchedCheckpoints::Start(cfg_, c_.clock); watched.ok()) {
      own_checkpoints_ = std::move(*watched);
      checkpoints_ = own_checkpoints_.get();
    }
  }
  Perform(policy_.OnFallback(Now(), verdict->seq, start->state));
}

void Agent::EndBackgroundWork() {
  const LeftBehind left =
      EndStoreWork(uploader(), renewal_, store_work_, c_.clock, kExitWait, policy_.deadline());
  result_.abandoned = left.any;
  threads_left_ = left.threads || (c_.ports.uploader == nullptr && uploader_.left_any());
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
  // A start that ended early (a failure, a stop, a complete job) may leave
  // the ledger's first events on the store-work queue, whose tasks use the
  // agent: waited for briefly; what still runs keeps the agent (RunAgent
  // leaves it) and ends with the process.
  if (!result.abandoned && !store_work_.DrainFor(kLedgerWait)) {
    LogWarn("the ledger's events still wait for the store; leaving them behind");
    threads_left_ = true;
    result.abandoned = true;
  }
  return result;
}

AgentResult Agent::RunJob() {
  events_.SetEngineIdentity(cfg_.index, cfg_.engine_attempt);
  if (auto near = AttemptBudgetWarning(cfg_.engine_attempt, cfg_.fleet_max_attempts)) {
    LogWarn("{}", *near);  // docs/fleet.md, "Retry budgets"
  }
  if (pid1_) LogInfo("running as PID 1: reaping every orphaned process");
  if (Status st = BlockSignals(); !st.ok()) {
    LogError("{}", st.message());
    result_.exit_code = kExitFailure;
    return result_;
  }
  // After the signals are blocked: the first task starts the store-work
  // thread, which inherits the mask (a SIGTERM must not end it).
  attempt_.Record("agent-start", AgentStartDetails(c_.identity, c_.launch_time));
  // Every failure once the lease is held releases it, so the next agent
  // need not wait lease.timeout for an agent that never worked.
  auto fail = [&](const Status& st, int exit_code = kExitFailure) {
    LogError("{}", st.message());
    FlushLogs();
    ReleaseLeaseNow();
    result_.exit_code = exit_code;
    return result_;
  };
  ClaimedDir claimed = ClaimCheckpointDir(cfg_);
  if (!claimed.status.ok()) return fail(claimed.status, claimed.exit_code);
  host_lock_ = std::move(claimed.lock);
  // Only the agent holding the checkpoint dir writes beside it.
  logs_.Open(c_.env);
  launcher_.set_output(tail_.Wrap(logs_.TrainerSink()));
  // Notices are watched for from here on, through the start (docs/design.md §9).
  monitor_ = NewInterruptionMonitor(c_);
  // A member: a start left running still uses it.
  StartWatch& watch = watch_.emplace(c_.clock, [this] { return SignalPending(); }, monitor_.get(),
                                     cfg_.imds.poll_interval);
  JobStart start = RunStart(watch);
  if (start.outcome == JobStart::Outcome::kFailed) {
    if (start.exit_code == kExitInterrupted) {
      LogError("the store did not answer for {} s at start; nothing was changed, exiting {} so "
               "that the job is run again",
               duration_cast<seconds>(kStartRetryBound).count(), kExitInterrupted);
    }
    return fail(start.status, start.exit_code);
  }
  if (start.outcome == JobStart::Outcome::kComplete) {
    LogInfo("job {} is already complete; not starting it again", cfg_.job);
    (void)c_.notifier.Notify("READY=1");
    PerformOnComplete(EndContext());
    result_.exit_code = kExitOk;
    return result_;
  }
  if (start.outcome == JobStart::Outcome::kStopped || watch.stopped()) {
    return StoppedAtStart(watch);
  }
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
  if (Status st = Prepare(); !st.ok()) return fail(st);
  (void)c_.notifier.Notify("READY=1");
  (void)c_.notifier.Notify("STATUS=training");
  Perform(policy_.OnRestored(Now(), start.point.state));
  // What the metadata service said during the start (a rebalance
  // recommendation, ...), now that the trainer runs.
  for (const InterruptionEvent& e : watch.TakeOthers()) {
    Perform(policy_.OnInterruption(Now(), e, 0));
  }
  Loop();
  EndBackgroundWork();
  // What is left of the trainer's group gets stop_signal, then SIGKILL after
  // stop_grace; no descendant's descriptor is waited for (docs/design.md §11).
  trainer_.reset();
  finished_trainer_.reset();
  FinishStoppedTrainers();
  if (pid1_) ReapOrphanedChildren();
  // After the final snapshot's commit (the loop ends on Exit) and after the
  // trainer's last lines were read: never before (docs/design.md §13).
  FlushLogs();
  return result_;
}

}  // namespace

std::string NoticeFilePath(const Config& config) {
  return DirName(config.checkpoint_dir) + "/.spotguard-notice-" + config.job + ".json";
}

AgentResult RunAgent(const AgentContext& context) {
  auto agent = std::make_unique<Agent>(context);
  AgentResult result = agent->Run();
  // Work given up on still runs on its threads and uses the agent: leave
  // the agent to it; the caller ends the process.
  if (agent->threads_left()) (void)agent.release();  // NOLINT(bugprone-unused-return-value)
  return result;
}

}  // namespace sg
