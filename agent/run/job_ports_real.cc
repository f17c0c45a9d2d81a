#include "agent/run/job_ports_real.h"

#include "agent/trainer/supervisor.h"
#include "common/aws_environment.h"
#include "common/log.h"

namespace sg {

ProcessTrainerLauncher::ProcessTrainerLauncher(const Config& config,
                                               const std::map<std::string, std::string>& env,
                                               std::string notice_file, std::string record_path)
    : config_(config),
      env_(env),
      notice_file_(std::move(notice_file)),
      record_path_(std::move(record_path)) {}

StatusOr<std::unique_ptr<Trainer>> ProcessTrainerLauncher::Start(const TrainerLaunch& launch) {
  SG_ASSIGN_OR_RETURN(std::unique_ptr<TrainerProcess> trainer,
                      TrainerProcess::Start(config_, env_, launch, notice_file_, record_path_,
                                            output_));
  return std::unique_ptr<Trainer>(std::move(trainer));
}

StatusOr<std::unique_ptr<WatchedCheckpoints>> WatchedCheckpoints::Start(const Config& config,
                                                                        Clock& clock) {
  SG_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointWatcher> watcher,
                      CheckpointWatcher::Start(config.checkpoint_dir, SettleTime(config), clock));
  return std::unique_ptr<WatchedCheckpoints>(
      new WatchedCheckpoints(std::move(watcher), CheckpointDetector::ForConfig(config)));
}

void WatchedCheckpoints::Poll() {
  if (auto polled = watcher_->Poll(); !polled.ok()) {
    LogWarn("watching {} failed: {}", watcher_->checkpoint_dir(), polled.status().message());
  }
}

StatusOr<std::vector<Checkpoint>> WatchedCheckpoints::Complete() {
  return watcher_->CompleteCheckpoints(detector_);
}

UploadOutcome OutcomeOf(const SnapshotUploader::Result& r) {
  UploadOutcome o;
  o.seconds = r.seconds;
  if (r.result.ok()) {
    o.kind = UploadOutcome::Kind::kCommitted;
    o.seq = r.result->seq;
    o.bytes = r.result->bytes;
    o.stored_bytes = r.result->stored_bytes;
    o.reused_bytes = r.result->reused_bytes;
    return o;
  }
  const Status& st = r.result.status();
  o.message = std::string(st.message());
  if (st.reason() == "Fenced") {
    o.kind = UploadOutcome::Kind::kFenced;
  } else if (st.Is(StatusCode::kCancelled) || st.Is(StatusCode::kUnavailable)) {
    o.kind = UploadOutcome::Kind::kNotCommitted;  // changed under us, or pre-empted
  } else {
    o.kind = UploadOutcome::Kind::kFailed;
  }
  return o;
}

void ThreadUploader::Start(const Checkpoint& checkpoint) {
  if (busy()) {
    *cancel_ = true;  // it stays cancelled; a new flag serves the new upload
    left_any_ = true;
  }
  cancel_ = std::make_shared<std::atomic<bool>>(false);
  call_.Start([upload = upload_, &clock = clock_, cancel = cancel_, checkpoint] {
    const auto start = clock.Monotonic();
    StatusOr<SnapshotResult> r = upload(checkpoint, cancel.get());
    return Result{std::move(r), std::chrono::duration<double>(clock.Monotonic() - start).count()};
  });
}

LeftBehind EndStoreWork(SnapshotUploader& uploader, BackgroundCall<Status>& renewal,
                        BackgroundQueue& queue, const ExitBound& bound) {
  auto left = [&] { return bound.left(); };
  LeftBehind out;
  if (uploader.busy()) {
    uploader.Cancel();
    if (!uploader.Wait(left())) {
      LogError("an upload still waits for the store; leaving it behind");
      out.any = true;
    }
  }
  if (renewal.busy() && !renewal.WaitFor(left())) {
    LogError("a lease renewal still waits for the store; leaving it behind");
    out.any = out.threads = true;
  }
  if (!queue.DrainFor(left())) {
    LogError("event records or the lease's release still wait for the store; leaving them behind");
    out.any = out.threads = true;
  }
  return out;
}

StatusOr<AutoScalingClient*> LazyAutoScaling::Client() {
  if (client_) return client_.get();
  if (aws_ == nullptr) return Status::InvalidArgument("no AWS environment for Auto Scaling calls");
  // The same transport, credentials and IMDS client as the store's.
  const std::string region = aws_->Region();
  if (region.empty()) return Status::InvalidArgument("no AWS region for Auto Scaling calls");
  AutoScalingClientOptions options;
  options.region = region;
  options.endpoint = ResolveAutoScalingEndpoint(std::nullopt, region, aws_->env());
  client_ =
      std::make_unique<AutoScalingClient>(aws_->transport(), aws_->credentials(), clock_, options);
  return client_.get();
}

StatusOr<AutoScalingInstance> LazyAutoScaling::DescribeAutoScalingInstance(
    const std::string& instance_id) {
  SG_ASSIGN_OR_RETURN(AutoScalingClient * client, Client());
  return client->DescribeAutoScalingInstance(instance_id);
}

Status LazyAutoScaling::UpdateAutoScalingGroup(const std::string& group_name,
                                               const GroupCapacity& capacity) {
  SG_ASSIGN_OR_RETURN(AutoScalingClient * client, Client());
  return client->UpdateAutoScalingGroup(group_name, capacity);
}

Status LazyAutoScaling::CompleteLifecycleAction(const std::string& group_name,
                                                const std::string& hook_name,
                                                const std::string& instance_id,
                                                LifecycleActionResult result) {
  SG_ASSIGN_OR_RETURN(AutoScalingClient * client, Client());
  return client->CompleteLifecycleAction(group_name, hook_name, instance_id, result);
}

}  // namespace sg
