#include "agent/daemon.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <future>
#include <mutex>

#include "agent/capture.h"
#include "agent/checkpoint_watcher.h"
#include "agent/events.h"
#include "agent/exit_codes.h"
#include "agent/fencing.h"
#include "agent/host_lock.h"
#include "agent/interruption_monitor.h"
#include "agent/lease.h"
#include "agent/local_checkpoint.h"
#include "agent/manifest.h"
#include "agent/notice_budget.h"
#include "agent/presets.h"
#include "agent/retention.h"
#include "agent/snapshot_commands.h"
#include "agent/snapshot_reader.h"
#include "agent/snapshot_writer.h"
#include "agent/supervisor.h"
#include "agent/trainer_record.h"
#include "common/autoscaling_client.h"
#include "common/aws_environment.h"
#include "common/files.h"
#include "common/http.h"
#include "common/log.h"
#include "common/process.h"
#include "common/signal_names.h"

namespace sg {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kTick = milliseconds(100);

double SecondsSince(Clock& clock, Clock::MonoTime t) {
  return std::chrono::duration<double>(clock.Monotonic() - t).count();
}

class Agent {
 public:
  explicit Agent(const AgentContext& c)
      : c_(c),
        cfg_(c.config),
        events_(c.store, c.clock, cfg_.job, c.instance),
        lease_(c.store, c.clock, cfg_.job, c.instance,
               LeaseOptions{cfg_.lease.heartbeat, cfg_.lease.timeout}),
        detector_(CheckpointDetector::ForConfig(cfg_)),
        notice_file_(NoticeFilePath(cfg_)) {}

  AgentResult Run();

 private:
  enum class Stop { kNotice, kSigterm, kComplete, kFenced, kFailed };

  Status BlockSignals();
  bool SignalPending();
  StatusOr<bool> AlreadyComplete();
  // Waits for the lease; false when a signal asked us to stop meanwhile.
  StatusOr<bool> AcquireLease();
  // Records this generation's fence (agent/fencing.h). REQUIRES: the lease.
  Status DrawFence();
  Status RestoreAtStart();
  Status StartTrainer();
  void Loop();

  // Uploads `checkpoint` now (capture, snapshot, commit). REQUIRES: the lease.
  StatusOr<SnapshotResult> Upload(const Checkpoint& checkpoint, const std::atomic<bool>* cancel);
  void StartPeriodicUpload(const Checkpoint& checkpoint);
  void CollectPeriodicUpload(bool wait);
  void CancelPeriodicUpload();
  std::optional<Checkpoint> NewestUncommitted();
  std::optional<Checkpoint> NewestLocal();
  void RecordCommit(const SnapshotResult& r, const Checkpoint& checkpoint, double seconds);
  // An event record, or, while the job is ending (a notice, SIGTERM), a note
  // to write it once the trainer is stopped: a slow store must not spend the
  // final snapshot's budget on housekeeping.
  void RecordEvent(const std::string& kind, const nlohmann::ordered_json& data);
  // Writes the deferred event records and runs the deferred retention.
  void FinishHousekeeping();

  void HandleNotice(const InterruptionEvent& event);
  void HandleSigterm();
  void HandleTrainerExit(const ExitStatus& status);
  void HandleFenced(const Status& why);
  // Last snapshot on the way out: ask for a checkpoint, wait for one newer
  // than the last commit until `wait_until`, upload what is newest.
  std::optional<SnapshotResult> FinalSnapshot(Clock::MonoTime wait_until, bool ask_trainer);
  void StopTrainer(milliseconds grace);
  void Finish(int exit_code);
  Status RenewLease();
  // The Auto Scaling side of the job's end: on_complete and lifecycle hooks.
  StatusOr<AutoScalingClient*> AutoScaling();
  StatusOr<std::string> MyAutoScalingGroup();
  void PerformOnComplete();
  void CompleteLifecycleHook();

  const AgentContext& c_;
  const Config& cfg_;
  EventLog events_;
  std::mutex lease_mu_;
  LeaseKeeper lease_;
  CheckpointDetector detector_;
  const std::string notice_file_;
  std::optional<HostLock> host_lock_;  // held for the whole run
  std::string staging_root_;
  UniqueFd signal_fd_;
  std::unique_ptr<CheckpointWatcher> watcher_;
  std::unique_ptr<InterruptionMonitor> monitor_;
  std::unique_ptr<TrainerProcess> trainer_;
  int attempt_ = 0;
  int restarts_ = 0;
  std::optional<Clock::MonoTime> restart_at_;
  std::optional<CheckpointMark> committed_;  // the newest checkpoint in the store
  std::optional<int64_t> committed_step_;
  std::optional<uint64_t> last_seq_;  // of the newest snapshot committed or restored
  std::string resume_;                // what the trainer is (re)started from; "" = fresh
  double upload_rate_ = kDefaultUploadBytesPerSecond;
  bool upload_first_ = false;  // a local checkpoint the store lacks: upload at once
  bool defer_housekeeping_ = false;
  std::vector<std::pair<std::string, nlohmann::ordered_json>> deferred_events_;
  bool retention_due_ = false;

  // The periodic upload in flight, on its own thread.
  std::future<StatusOr<SnapshotResult>> upload_;
  std::optional<Checkpoint> upload_checkpoint_;
  Clock::MonoTime upload_started_{};
  std::atomic<bool> upload_cancel_{false};

  Clock::MonoTime next_upload_{}, next_poll_{}, next_checkpoint_signal_{}, next_watchdog_{};
  bool done_ = false;
  AgentResult result_;
  std::unique_ptr<AutoScalingClient> asg_;
};

StatusOr<AutoScalingClient*> Agent::AutoScaling() {
  if (asg_) return asg_.get();
  if (c_.aws == nullptr) {
    return Status::InvalidArgument("no AWS environment for Auto Scaling calls");
  }
  // The same transport, credentials and IMDS client as the store's.
  const std::string region = c_.aws->Region();
  if (region.empty()) return Status::InvalidArgument("no AWS region for Auto Scaling calls");
  AutoScalingClientOptions options;
  options.region = region;
  options.endpoint = ResolveAutoScalingEndpoint(std::nullopt, region, c_.aws->env());
  asg_ = std::make_unique<AutoScalingClient>(c_.aws->transport(), c_.aws->credentials(), c_.clock,
                                             options);
  return asg_.get();
}

StatusOr<std::string> Agent::MyAutoScalingGroup() {
  SG_ASSIGN_OR_RETURN(AutoScalingClient * asg, AutoScaling());
  SG_ASSIGN_OR_RETURN(AutoScalingInstance me, asg->DescribeAutoScalingInstance(c_.instance));
  return me.group_name;
}

void Agent::PerformOnComplete() {
  switch (cfg_.on_complete) {
    case OnComplete::kMark:
      return;
    case OnComplete::kScaleToZero: {
      auto group = MyAutoScalingGroup();
      Status st = group.ok() ? (*AutoScaling())
                                   ->UpdateAutoScalingGroup(
                                       *group, GroupCapacity{.min_size = 0, .desired_capacity = 0})
                             : group.status();
      if (st.ok()) {
        LogInfo("scaled Auto Scaling group {} to zero: the job is done", *group);
        (void)events_.Record("scale-to-zero", {{"group", *group}});
      } else {
        LogError("scaling the Auto Scaling group to zero failed: {}", st.message());
      }
      return;
    }
    case OnComplete::kShutdown: {
      LogInfo("the job is done; shutting the instance down");
      SpawnOptions spawn;
      spawn.argv = {"shutdown", "-h", "now"};
      spawn.env = c_.env;
      auto child = ChildProcess::Spawn(spawn);
      if (child.ok()) {
        auto ended = child->Wait(std::chrono::milliseconds(30'000));
        if (ended.ok() && ended->has_value() && (*ended)->success()) return;
      }
      LogError("shutdown -h now failed");
      return;
    }
  }
}

void Agent::CompleteLifecycleHook() {
  if (!cfg_.lifecycle_hook) return;
  auto group = MyAutoScalingGroup();
  Status st = group.ok() ? (*AutoScaling())
                               ->CompleteLifecycleAction(*group, *cfg_.lifecycle_hook, c_.instance,
                                                         LifecycleActionResult::kContinue)
                         : group.status();
  if (st.ok()) {
    LogInfo("completed lifecycle action {} of group {} (CONTINUE)", *cfg_.lifecycle_hook, *group);
    (void)events_.Record("lifecycle-complete", {{"group", *group}, {"hook", *cfg_.lifecycle_hook}});
  } else {
    LogError("completing the lifecycle action failed: {}", st.message());
  }
}

Status Agent::BlockSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  // Blocked before any thread starts, so every thread inherits the mask and
  // the signals only arrive through the signalfd.
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return Status::IOError("sigprocmask");
  int fd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) return Status::FromErrno(errno, "signalfd");
  signal_fd_.reset(fd);
  return Status::Ok();
}

bool Agent::SignalPending() {
  signalfd_siginfo info{};
  bool any = false;
  while (::read(signal_fd_.get(), &info, sizeof info) == sizeof info) {
    LogInfo("received {}", SignalName(static_cast<int>(info.ssi_signo)));
    any = true;
  }
  return any;
}

StatusOr<bool> Agent::AlreadyComplete() {
  auto marker = c_.store.Head(cfg_.job + "/complete");
  if (marker.ok()) return true;
  if (marker.status().Is(StatusCode::kNotFound)) return false;
  return marker.status();
}

StatusOr<bool> Agent::AcquireLease() {
  bool said = false;
  while (true) {
    StatusOr<LeaseKeeper::Attempt> attempt = [&] {
      std::lock_guard<std::mutex> lock(lease_mu_);
      return lease_.TryAcquire();
    }();
    if (!attempt.ok()) return attempt.status();
    if (attempt->outcome == LeaseKeeper::Outcome::kAcquired) return true;
    if (!said) {
      const LeaseState& holder = attempt->current;
      const std::string who =
          holder.instance +
          (holder.agent ? " (agent pid " + std::to_string(holder.agent->pid) + ")" : "");
      LogInfo(
          "job {} is held by {}{} (lease generation {}); waiting for it to be released or "
          "go stale ({}s without renewal)",
          cfg_.job, who, holder.instance == c_.instance ? ", another agent of this instance" : "",
          holder.generation, duration_cast<seconds>(cfg_.lease.timeout).count());
      (void)c_.notifier.Notify("STATUS=waiting for the lease held by " + who);
      said = true;
    }
    // Wait a heartbeat (a tenth of the timeout at most), awake for signals.
    const auto until = c_.clock.Monotonic() +
                       std::min<milliseconds>(cfg_.lease.heartbeat, cfg_.lease.timeout / 10);
    while (c_.clock.Monotonic() < until) {
      if (SignalPending()) return false;
      c_.clock.SleepFor(kTick);
    }
  }
}

Status Agent::DrawFence() {
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(lease_mu_);
    generation = lease_.generation();
  }
  return sg::DrawFence(c_.store, cfg_.job, generation, c_.instance, FormatUtc(c_.clock.Now(), true))
      .status();
}

Status Agent::RestoreAtStart() {
  const auto start = c_.clock.Monotonic();
  // One listing of the history, for the comparison and for the restore.
  SnapshotCatalog catalog(c_.store, cfg_.job);
  SG_ASSIGN_OR_RETURN(SnapshotHistory history, catalog.History());
  std::error_code ec;
  std::filesystem::create_directories(cfg_.checkpoint_dir, ec);
  // A local checkpoint the store does not hold (the agent restarted on the
  // same machine, the upload never finished) is never thrown away.
  auto local = DetectSettledNow(detector_, SettleTime(cfg_), c_.clock);
  if (local.ok() && !local->empty()) {
    const Checkpoint& l = local->front();
    const LocalComparison cmp = CompareLocalCheckpoint(cfg_.checkpoint_dir, l, history.Readable());
    if (cmp.standing != LocalStanding::kOlder) {
      result_.resumed_step = l.step;
      resume_ = cfg_.checkpoint_dir + "/" + l.resume;
      if (cmp.standing == LocalStanding::kInStore) {
        LogInfo("the local checkpoint {} is already in the store ({}); resuming from it", l.id,
                cmp.why);
        committed_ = CheckpointMark::Of(l);
        committed_step_ = l.step;
        last_seq_ = cmp.seq;
      } else {
        LogWarn(
            "the local checkpoint {} is not in the store ({}); resuming from it and uploading it "
            "first",
            l.id, cmp.why);
        upload_first_ = true;
      }
      (void)events_.Record("resume-local", {{"checkpoint", l.id}, {"why", cmp.why}});
      return Status::Ok();
    }
    LogInfo("the local checkpoint {} is older than the store's ({}); restoring", l.id, cmp.why);
  }
  if (history.empty()) {
    LogInfo("no snapshot of job {} yet: starting fresh", cfg_.job);
    return Status::Ok();
  }
  // Files of the same name as the snapshot's that restore did not put there
  // are older than the snapshot (or local would have won above): they are
  // kept in a backup dir, never deleted.
  RestoreOptions options;
  options.replace_foreign = true;
  Restorer restorer(c_.store, options);
  SG_ASSIGN_OR_RETURN(RestoreResult restored, restorer.RestoreNewest(history, cfg_.checkpoint_dir));
  const Manifest* manifest = history.Find(restored.seq);
  result_.restore_seconds = SecondsSince(c_.clock, start);
  if (manifest) {
    committed_step_ = manifest->step;
    result_.resumed_step = manifest->step;
  }
  // Restored files are not new work: only checkpoints written from now on are.
  committed_ = CheckpointMark{"", committed_step_, c_.clock.Now()};
  resume_ = restored.resume_path;
  last_seq_ = restored.seq;
  LogInfo(
      "restored snapshot {} ({}) in {:.1f}s, keeping {} entries that were there; resuming "
      "from {}",
      SeqName(restored.seq), restored.bytes, result_.restore_seconds, restored.kept_foreign,
      resume_);
  (void)events_.Record("restore", {{"seq", restored.seq},
                                   {"seconds", result_.restore_seconds},
                                   {"resume", restored.resume_path},
                                   {"backup_dir", restored.backup_dir}});
  return Status::Ok();
}

Status Agent::StartTrainer() {
  ++attempt_;
  SG_ASSIGN_OR_RETURN(
      trainer_, TrainerProcess::Start(cfg_, c_.env, TrainerLaunch{resume_, attempt_}, notice_file_,
                                      TrainerRecordPath(cfg_.checkpoint_dir)));
  return Status::Ok();
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
  {
    std::lock_guard<std::mutex> lock(lease_mu_);
    request.generation = lease_.generation();
  }
  request.cancel = cancel;
  // The writer has verified the capture by then. Fencing: the commit
  // follows a successful renewal, well inside the lease timeout, so no
  // successor can have taken the job meanwhile.
  request.verify_before_commit = [&]() -> Status { return RenewLease(); };
  SnapshotWriter writer(c_.store, c_.clock, SnapshotOptionsOf(cfg_));
  return writer.Write(capture, request);
}

std::optional<Checkpoint> Agent::NewestUncommitted() {
  if (!watcher_) return std::nullopt;
  auto all = watcher_->CompleteCheckpoints(detector_);
  if (!all.ok()) {
    LogWarn("looking for checkpoints failed: {}", all.status().message());
    return std::nullopt;
  }
  return FirstNewerThan(*all, committed_);
}

void Agent::RecordCommit(const SnapshotResult& r, const Checkpoint& checkpoint, double secs) {
  committed_ = CheckpointMark::Of(checkpoint);
  committed_step_ = checkpoint.step;
  last_seq_ = r.seq;
  result_.committed_step = checkpoint.step;
  if (secs > 0.05 && r.stored_bytes > 0) upload_rate_ = static_cast<double>(r.stored_bytes) / secs;
  LogInfo("snapshot {} committed: checkpoint {} (step {}), {} bytes stored in {:.1f}s",
          SeqName(r.seq), checkpoint.id, checkpoint.step ? std::to_string(*checkpoint.step) : "-",
          r.stored_bytes, secs);
  RecordEvent("snapshot", {{"seq", r.seq},
                           {"checkpoint", checkpoint.id},
                           {"step", checkpoint.step ? nlohmann::ordered_json(*checkpoint.step)
                                                    : nlohmann::ordered_json(nullptr)},
                           {"bytes", r.bytes},
                           {"stored_bytes", r.stored_bytes},
                           {"seconds", secs}});
  (void)c_.notifier.Notify("STATUS=snapshot " + SeqName(r.seq) + " committed");
  retention_due_ = true;
  if (!defer_housekeeping_) FinishHousekeeping();
}

void Agent::RecordEvent(const std::string& kind, const nlohmann::ordered_json& data) {
  if (defer_housekeeping_) {
    deferred_events_.emplace_back(kind, data);
    return;
  }
  (void)events_.Record(kind, data);
}

void Agent::FinishHousekeeping() {
  defer_housekeeping_ = false;
  for (const auto& [kind, data] : deferred_events_) (void)events_.Record(kind, data);
  deferred_events_.clear();
  if (!retention_due_) return;
  retention_due_ = false;
  auto gc = CollectGarbage(c_.store, c_.clock, cfg_.job, GcOptions{.keep = cfg_.keep});
  if (!gc.ok()) LogWarn("retention failed: {}", gc.status().message());
}

void Agent::StartPeriodicUpload(const Checkpoint& checkpoint) {
  upload_cancel_ = false;
  upload_checkpoint_ = checkpoint;
  upload_started_ = c_.clock.Monotonic();
  upload_ = std::async(std::launch::async,
                       [this, checkpoint] { return Upload(checkpoint, &upload_cancel_); });
}

void Agent::CollectPeriodicUpload(bool wait) {
  if (!upload_.valid()) return;
  if (!wait && upload_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
  StatusOr<SnapshotResult> r = upload_.get();
  const Checkpoint checkpoint = *upload_checkpoint_;
  upload_checkpoint_.reset();
  if (r.ok()) {
    RecordCommit(*r, checkpoint, SecondsSince(c_.clock, upload_started_));
    return;
  }
  if (r.status().reason() == "Fenced") {
    HandleFenced(r.status());
    return;
  }
  if (r.status().Is(StatusCode::kCancelled) || r.status().Is(StatusCode::kUnavailable)) {
    // Changed under us or pre-empted: the next look takes the next state.
    LogInfo("upload of checkpoint {} not committed: {}", checkpoint.id, r.status().message());
    next_upload_ = c_.clock.Monotonic() + std::min<milliseconds>(cfg_.upload_interval, seconds(5));
    return;
  }
  LogError("upload of checkpoint {} failed: {}", checkpoint.id, r.status().message());
}

void Agent::CancelPeriodicUpload() {
  if (!upload_.valid()) return;
  upload_cancel_ = true;
  CollectPeriodicUpload(/*wait=*/true);
}

std::optional<SnapshotResult> Agent::FinalSnapshot(Clock::MonoTime wait_until, bool ask_trainer) {
  CancelPeriodicUpload();
  if (done_) return std::nullopt;  // fenced meanwhile
  if (ask_trainer && cfg_.checkpoint_signal && trainer_ && trainer_->running()) {
    LogInfo("asking the trainer for a checkpoint ({})", SignalName(*cfg_.checkpoint_signal));
    // A checkpoint finished after this moment answers the request.
    const CheckpointMark asked{"", std::nullopt, c_.clock.Now()};
    (void)trainer_->Signal(*cfg_.checkpoint_signal);
    auto fresh = watcher_->WaitForNewer(detector_, asked, wait_until);
    if (fresh.ok() && fresh->has_value()) {
      LogInfo("the trainer wrote checkpoint {}", (*fresh)->id);
    } else {
      LogWarn("no new checkpoint in time; committing the newest existing one");
    }
  }
  std::optional<Checkpoint> target = NewestUncommitted();
  if (!target) {
    LogInfo("the newest checkpoint is already committed");
    return std::nullopt;
  }
  const auto start = c_.clock.Monotonic();
  auto r = Upload(*target, nullptr);
  if (!r.ok()) {
    if (r.status().reason() == "Fenced") {
      HandleFenced(r.status());
    } else {
      LogError("the final snapshot failed: {}", r.status().message());
    }
    return std::nullopt;
  }
  RecordCommit(*r, *target, SecondsSince(c_.clock, start));
  return *r;
}

void Agent::StopTrainer(milliseconds grace) {
  if (!trainer_ || !trainer_->running()) return;
  if (trainer_->Poll()) return;
  auto stopped = trainer_->Stop(cfg_.stop_signal, grace);
  if (stopped.ok()) LogInfo("the trainer stopped: {}", stopped->ToString());
}

void Agent::Finish(int exit_code) {
  done_ = true;
  result_.exit_code = exit_code;
  // The newest step the trainer wrote a checkpoint for, complete or not.
  if (auto listed = ListCheckpointDir(cfg_.checkpoint_dir); listed.ok()) {
    for (const ListedFile& f : *listed) {
      if (auto step = ParseStep(f.relpath);
          step && (!result_.local_step || *step > *result_.local_step)) {
        result_.local_step = step;
      }
    }
  }
  std::lock_guard<std::mutex> lock(lease_mu_);
  if (exit_code != kExitFenced) {
    Status st = lease_.Release();
    if (!st.ok()) LogWarn("releasing the lease failed: {}", st.message());
  }
}

void Agent::HandleFenced(const Status& why) {
  if (done_) return;
  LogError("FENCED: {}; stopping the trainer and committing nothing more", why.message());
  upload_cancel_ = true;
  StopTrainer(milliseconds(std::min<int64_t>(cfg_.stop_grace.count(), 10'000)));
  (void)events_.Record("fenced", {{"reason", why.message()}});
  Finish(kExitFenced);
}

void Agent::HandleNotice(const InterruptionEvent& event) {
  const auto notice_at = c_.clock.Monotonic();
  // Nothing but the final snapshot until the trainer is stopped (docs/design.md §9).
  defer_housekeeping_ = true;
  LogWarn("INTERRUPTION NOTICE: {}", event.Describe());
  (void)c_.notifier.Notify("STATUS=interruption notice: " + event.Describe());
  if (Status st = WriteFileAtomic(notice_file_, event.ToJson().dump() + "\n"); !st.ok()) {
    LogWarn("writing the notice file failed: {}", st.message());
  }
  RecordEvent("notice", event.ToJson());
  // Time left: to the deadline the notice names, else two minutes.
  auto left = seconds(120);
  if (event.time && event.kind == InterruptionEvent::Kind::kNotice) {
    left = duration_cast<seconds>(*event.time - c_.clock.Now());
  }
  // Wait for the trainer's checkpoint no longer than leaves time to upload it.
  std::optional<Checkpoint> newest = NewestLocal();
  uint64_t expected_bytes = 0;
  if (newest) {
    for (const std::string& rel : newest->relpaths) {
      std::error_code ec;
      expected_bytes += std::filesystem::file_size(cfg_.checkpoint_dir + "/" + rel, ec);
    }
  }
  const NoticeBudget budget =
      ComputeNoticeBudget(duration_cast<milliseconds>(left), expected_bytes, upload_rate_);
  const auto upload_estimate = budget.upload_estimate;
  const auto wait = budget.wait;
  LogInfo(
      "{}s until the deadline; waiting up to {:.1f}s for a checkpoint (upload estimate {:.1f}s)",
      left.count(), wait.count() / 1000.0, upload_estimate.count() / 1000.0);
  auto committed = FinalSnapshot(notice_at + wait, /*ask_trainer=*/true);
  if (done_) return;
  const double to_commit = SecondsSince(c_.clock, notice_at);
  result_.notice_to_commit_seconds = committed ? to_commit : -1;
  const auto time_left = duration_cast<milliseconds>(left) -
                         duration_cast<milliseconds>(c_.clock.Monotonic() - notice_at);
  StopTrainer(std::clamp<milliseconds>(time_left - seconds(5), milliseconds(0), cfg_.stop_grace));
  CompleteLifecycleHook();
  FinishHousekeeping();
  (void)events_.Record(
      "stop", {{"reason", "notice"},
               {"action", event.action},
               {"notice_to_commit_seconds",
                committed ? nlohmann::ordered_json(to_commit) : nlohmann::ordered_json(nullptr)},
               {"seq", committed ? nlohmann::ordered_json(committed->seq)
                                 : nlohmann::ordered_json(nullptr)}});
  LogInfo(
      "interrupted: {} in {:.1f}s from the notice; exiting {}",
      committed ? "snapshot " + SeqName(committed->seq) + " committed" : "nothing new to commit",
      to_commit, static_cast<int>(kExitInterrupted));
  Finish(kExitInterrupted);
}

void Agent::HandleSigterm() {
  (void)c_.notifier.Notify("STOPPING=1");
  LogInfo("stopping: last checkpoint, upload, stop the trainer");
  defer_housekeeping_ = true;
  const auto until = c_.clock.Monotonic() + std::min<milliseconds>(cfg_.stop_grace, seconds(60));
  FinalSnapshot(until, /*ask_trainer=*/true);
  if (done_) return;
  StopTrainer(cfg_.stop_grace);
  FinishHousekeeping();
  (void)events_.Record("stop", {{"reason", "signal"}});
  Finish(kExitOk);
}

void Agent::HandleTrainerExit(const ExitStatus& status) {
  if (status.success()) {
    LogInfo("the trainer finished (exit 0); final snapshot");
    // Its last checkpoint may still be settling.
    const auto settle = duration_cast<milliseconds>(watcher_->settle()) + milliseconds(200);
    const auto until = c_.clock.Monotonic() + settle;
    while (c_.clock.Monotonic() < until) c_.clock.SleepFor(kTick);
    FinalSnapshot(c_.clock.Monotonic(), /*ask_trainer=*/false);
    if (done_) return;
    nlohmann::ordered_json marker = {
        {"time", FormatUtc(c_.clock.Now(), true)},
        {"instance", c_.instance},
        {"seq", last_seq_ ? nlohmann::ordered_json(*last_seq_) : nlohmann::ordered_json(nullptr)},
        {"step", committed_step_ ? nlohmann::ordered_json(*committed_step_)
                                 : nlohmann::ordered_json(nullptr)}};
    auto put = c_.store.Put(cfg_.job + "/complete", marker.dump(), PutCondition::CreateOnly());
    if (!put.ok() && !put.status().Is(StatusCode::kPreconditionFailed)) {
      LogError("writing the complete marker failed: {}", put.status().message());
    }
    (void)events_.Record("complete", marker);
    LogInfo("job {} is complete", cfg_.job);
    Finish(kExitOk);
    PerformOnComplete();
    return;
  }
  (void)events_.Record("crash", {{"exit", status.ToString()}, {"attempt", attempt_}});
  if (restarts_ >= cfg_.restart.max) {
    LogError("the trainer failed ({}) and was restarted {} times already; the job has failed",
             status.ToString(), restarts_);
    (void)events_.Record("failed", {{"exit", status.ToString()}, {"restarts", restarts_}});
    CancelPeriodicUpload();
    Finish(kExitFailure);
    return;
  }
  const double factor = std::pow(2.0, restarts_);
  const auto backoff = std::min<milliseconds>(
      cfg_.restart.max_backoff, milliseconds(static_cast<int64_t>(
                                    static_cast<double>(cfg_.restart.backoff.count()) * factor)));
  ++restarts_;
  LogWarn("the trainer failed ({}); restart {} of {} in {:.1f}s", status.ToString(), restarts_,
          cfg_.restart.max, backoff.count() / 1000.0);
  restart_at_ = c_.clock.Monotonic() + backoff;
  trainer_.reset();
}

std::optional<Checkpoint> Agent::NewestLocal() {
  if (!watcher_) return std::nullopt;
  auto all = watcher_->CompleteCheckpoints(detector_);
  if (!all.ok() || all->empty()) return std::nullopt;
  return all->front();
}

void Agent::Loop() {
  const auto now0 = c_.clock.Monotonic();
  next_upload_ = upload_first_ ? now0 : now0 + cfg_.upload_interval;
  next_poll_ = now0;
  if (cfg_.checkpoint_interval) next_checkpoint_signal_ = now0 + *cfg_.checkpoint_interval;
  next_watchdog_ = now0;
  while (!done_) {
    pollfd fds[2] = {{signal_fd_.get(), POLLIN, 0}, {watcher_->fd(), POLLIN, 0}};
    ::poll(fds, 2, static_cast<int>(kTick.count()));
    if (SignalPending()) {
      HandleSigterm();
      break;
    }
    (void)watcher_->Poll();
    const auto now = c_.clock.Monotonic();

    if (auto wd = c_.notifier.watchdog_interval(); wd && now >= next_watchdog_) {
      (void)c_.notifier.Notify("WATCHDOG=1");
      next_watchdog_ = now + duration_cast<milliseconds>(*wd);
    }
    {
      std::unique_lock<std::mutex> lock(lease_mu_);
      if (lease_.RenewalDue()) {
        Status st = lease_.Renew();
        lock.unlock();
        if (!st.ok()) {
          if (st.reason() == "Fenced") {
            HandleFenced(st);
            break;
          }
          LogWarn("renewing the lease failed (will retry): {}", st.message());
        }
      }
    }
    CollectPeriodicUpload(/*wait=*/false);
    if (done_) break;

    if (monitor_ && now >= next_poll_) {
      next_poll_ = now + cfg_.imds.poll_interval;
      for (const InterruptionEvent& e : monitor_->PollOnce()) {
        if (e.IsNotice()) {
          HandleNotice(e);
          break;
        }
        (void)events_.Record(std::string(InterruptionKindName(e.kind)), e.ToJson());
        if (e.kind == InterruptionEvent::Kind::kRebalance &&
            cfg_.on_rebalance == OnRebalance::kSnapshot) {
          LogWarn("rebalance recommendation: taking a snapshot now");
          if (cfg_.checkpoint_signal && trainer_ && trainer_->running()) {
            (void)trainer_->Signal(*cfg_.checkpoint_signal);
          }
          next_upload_ = now;  // upload as soon as a newer checkpoint is complete
        }
      }
      if (done_) break;
    }

    if (trainer_) {
      if (auto ended = trainer_->Poll()) {
        HandleTrainerExit(*ended);
        if (done_) break;
      }
    } else if (restart_at_ && now >= *restart_at_) {
      restart_at_.reset();
      std::optional<Checkpoint> newest = NewestLocal();
      resume_ = newest ? cfg_.checkpoint_dir + "/" + newest->resume : resume_;
      if (Status st = StartTrainer(); !st.ok()) {
        LogError("restarting the trainer failed: {}", st.message());
        Finish(kExitFailure);
        break;
      }
    }

    if (cfg_.checkpoint_interval && now >= next_checkpoint_signal_) {
      next_checkpoint_signal_ = now + *cfg_.checkpoint_interval;
      if (cfg_.checkpoint_signal && trainer_ && trainer_->running()) {
        (void)trainer_->Signal(*cfg_.checkpoint_signal);
      }
    }
    if (!upload_.valid() && now >= next_upload_) {
      if (std::optional<Checkpoint> newest = NewestUncommitted()) {
        next_upload_ = now + cfg_.upload_interval;
        StartPeriodicUpload(*newest);
      } else if (auto due = watcher_->NextSettle()) {
        next_upload_ = std::max(now, *due);  // look again when something settles
      } else {
        next_upload_ = now + std::min<milliseconds>(cfg_.upload_interval, seconds(1));
      }
    }
  }
}

AgentResult Agent::Run() {
  if (Status st = BlockSignals(); !st.ok()) {
    LogError("{}", st.message());
    result_.exit_code = kExitFailure;
    return result_;
  }
  // Every failure once the lease is held releases it (Finish), so the next
  // agent need not wait lease.timeout for an agent that never worked.
  auto fail = [&](const Status& st, int exit_code = kExitFailure) {
    LogError("{}", st.message());
    if (lease_.held()) Finish(exit_code);
    result_.exit_code = exit_code;
    return result_;
  };
  // Before anything else: one agent per checkpoint dir on this host
  // (docs/agent.md, "One agent per checkpoint directory, and no orphans").
  auto lock = HostLock::Acquire(cfg_.checkpoint_dir);
  if (!lock.ok()) {
    if (lock.status().reason() == "Locked") return fail(lock.status(), kExitFenced);
    // The lock file goes beside the dir: a read-only parent is reported the
    // way the writable check below reports it.
    if (Status st = CheckWritableDir(cfg_.checkpoint_dir, "checkpoint_dir " + cfg_.checkpoint_dir);
        !st.ok()) {
      return fail(st);
    }
    return fail(lock.status());
  }
  host_lock_.emplace(std::move(*lock));
  if (Status st = ValidateCheckpointDir(cfg_.checkpoint_dir); !st.ok()) {
    return fail(st, st.Is(StatusCode::kInvalidArgument) ? kExitUsage : kExitFailure);
  }
  // We hold the lock, so the agent that recorded a trainer is gone: what is
  // left of its trainer is an orphan still writing into the dir.
  auto leftover =
      StopLeftoverTrainer(cfg_.checkpoint_dir, cfg_.stop_signal,
                          std::min<milliseconds>(cfg_.stop_grace, milliseconds(30'000)));
  if (!leftover.ok()) return fail(leftover.status());
  auto complete = AlreadyComplete();
  if (!complete.ok()) return fail(complete.status());
  if (*complete) {
    LogInfo("job {} is already complete; not starting it again", cfg_.job);
    (void)c_.notifier.Notify("READY=1");
    PerformOnComplete();
    result_.exit_code = kExitOk;
    return result_;
  }
  // A trainer that cannot write checkpoints, and a restore that cannot
  // write files, are no use: say so before taking the job's lease.
  if (Status st = CheckWritableDir(cfg_.checkpoint_dir, "checkpoint_dir " + cfg_.checkpoint_dir);
      !st.ok()) {
    return fail(st);
  }
  auto leased = AcquireLease();
  if (!leased.ok()) return fail(leased.status());
  if (!*leased) {
    result_.exit_code = kExitOk;  // asked to stop while waiting
    return result_;
  }
  if (Status st = DrawFence(); !st.ok()) return fail(st);
  if (Status st = RestoreAtStart(); !st.ok()) return fail(st);
  auto staging = PrepareStagingRoot(cfg_.checkpoint_dir, cfg_.job);
  if (!staging.ok()) return fail(staging.status());
  staging_root_ = *staging;
  (void)RemoveStaleCaptures(staging_root_);
  auto watcher = CheckpointWatcher::Start(cfg_.checkpoint_dir, SettleTime(cfg_), c_.clock);
  if (!watcher.ok()) return fail(watcher.status());
  watcher_ = std::move(*watcher);
  if (c_.imds) {
    InterruptionMonitor::Options options;
    options.poll_interval = cfg_.imds.poll_interval;
    monitor_ = std::make_unique<InterruptionMonitor>(*c_.imds, c_.clock, options);
  }
  (void)c_.notifier.Notify("READY=1");
  (void)c_.notifier.Notify("STATUS=training");
  (void)events_.Record("start", {{"resume", resume_}});
  if (Status st = StartTrainer(); !st.ok()) return fail(st);
  Loop();
  trainer_.reset();
  return result_;
}

}  // namespace

std::string NoticeFilePath(const Config& config) {
  return DirName(config.checkpoint_dir) + "/.spotguard-notice-" + config.job + ".json";
}

AgentResult RunAgent(const AgentContext& context) {
  Agent agent(context);
  return agent.Run();
}

int RunAgentCommand(const Config& config, const std::map<std::string, std::string>& env) {
  // Built once: the store, the interruption monitor and the Auto Scaling
  // client share one transport, one IMDS client and one credentials chain.
  std::shared_ptr<AwsEnvironment> aws = OpenAws(config, env);
  auto store = OpenStore(config, env, aws);
  if (!store.ok()) {
    LogError("opening the store {}: {}", config.store, store.status().message());
    return kExitFailure;
  }
  ImdsClient* imds = aws->imds();  // null when AWS_EC2_METADATA_DISABLED=true
  std::string instance;
  if (imds) {
    auto identity = ReadInstanceIdentity(*imds);
    if (identity.ok()) {
      instance = identity->instance_id;
    } else {
      LogWarn(
          "the instance metadata service does not answer ({}); interruption notices cannot "
          "be seen on this machine",
          identity.status().message());
    }
  }
  if (instance.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    instance = host;
  }
  SystemdNotifier notifier(env);
  AgentContext context{config, env, **store, SystemClock(), imds, notifier, instance, aws.get()};
  return RunAgent(context).exit_code;
}

}  // namespace sg
