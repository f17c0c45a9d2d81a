// The real parts behind the loop's seams (agent/trainer/job_ports.h): the trainer as
// a child process, checkpoints found by the inotify watcher, uploads on a
// thread of their own, and the Auto Scaling client made on first use.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "agent/detect/checkpoint_watcher.h"
#include "agent/config/config.h"
#include "agent/run/job_policy.h"
#include "agent/trainer/job_ports.h"
#include "agent/detect/presets.h"
#include "agent/run/exit_bound.h"
#include "agent/trainer/supervisor.h"
#include "common/background_call.h"
#include "common/background_queue.h"

namespace sg {

class AwsEnvironment;

// What EndStoreWork left running: anything, and threads of ours (a fake
// uploader's upload is nothing that runs).
struct LeftBehind {
  bool any = false;
  bool threads = false;
};
// At the exit: cancels the upload, then waits, within what is left of the
// exit's `bound`, for it, the lease renewal and the queued store work; logs
// what is left behind.
LeftBehind EndStoreWork(SnapshotUploader& uploader, BackgroundCall<Status>& renewal,
                        BackgroundQueue& queue, const ExitBound& bound);

class ProcessTrainerLauncher final : public TrainerLauncher {
 public:
  // `config`, `env` must outlive the launcher.
  ProcessTrainerLauncher(const Config& config, const std::map<std::string, std::string>& env,
                         std::string notice_file, std::string record_path);
  StatusOr<std::unique_ptr<Trainer>> Start(const TrainerLaunch& launch) override;
  // Where the trainers started from now on send their lines (the log
  // capture, docs/design.md §13), besides the journal.
  void set_output(TrainerOutputSink sink) { output_ = std::move(sink); }

 private:
  const Config& config_;
  const std::map<std::string, std::string>& env_;
  const std::string notice_file_;
  const std::string record_path_;
  TrainerOutputSink output_;
};

class WatchedCheckpoints final : public CheckpointSource {
 public:
  static StatusOr<std::unique_ptr<WatchedCheckpoints>> Start(const Config& config, Clock& clock);
  int fd() const override { return watcher_->fd(); }
  void Poll() override;
  StatusOr<std::vector<Checkpoint>> Complete() override;
  std::optional<Clock::MonoTime> NextSettle() override { return watcher_->NextSettle(); }
  bool Writing() override { return !watcher_->Unsettled().empty(); }
  void SetUrgent(bool urgent) override { watcher_->SetUrgent(urgent); }
  void SetNodeRank(std::optional<int> rank) override {
    detector_.SetNodeRank(rank);
    watcher_->Relist();
  }

 private:
  WatchedCheckpoints(std::unique_ptr<CheckpointWatcher> watcher, CheckpointDetector detector)
      : watcher_(std::move(watcher)), detector_(std::move(detector)) {}
  std::unique_ptr<CheckpointWatcher> watcher_;
  CheckpointDetector detector_;
};

// An upload's result as the policy sees it: committed; fenced (reason
// "Fenced"); not committed (cancelled, or a file changed: Cancelled or
// Unavailable); or failed.
UploadOutcome OutcomeOf(const SnapshotUploader::Result& r);

class ThreadUploader final : public SnapshotUploader {
 public:
  // Uploads `checkpoint`, stopping before its commit once `*cancel` is set.
  using UploadFn = std::function<StatusOr<SnapshotResult>(const Checkpoint& checkpoint,
                                                          const std::atomic<bool>* cancel)>;
  // What `upload` uses must outlive an upload given up on (Wait returned
  // nullopt): the agent then ends the process (RunAgent, `abandoned`).
  // `run_inline`: Start runs the upload at once on the caller's thread (the
  // fake multi-node world's agents, tests/support/fake_group_world.h).
  ThreadUploader(UploadFn upload, Clock& clock, bool run_inline = false)
      : upload_(std::move(upload)),
        clock_(clock),
        cancel_(std::make_shared<std::atomic<bool>>()),
        call_(run_inline) {}
  // `runner`: where the upload runs (BackgroundCall's Runner; empty: a thread).
  ThreadUploader(UploadFn upload, Clock& clock, BackgroundCall<Result>::Runner runner)
      : upload_(std::move(upload)),
        clock_(clock),
        cancel_(std::make_shared<std::atomic<bool>>()),
        call_(std::move(runner)) {}
  // An upload was left running (Start over a busy one, or Wait gave up).
  bool left_any() const { return left_any_; }

  void Start(const Checkpoint& checkpoint) override;
  bool busy() const override { return call_.busy(); }
  void Cancel() override { *cancel_ = true; }
  std::optional<Result> Poll() override { return call_.Poll(); }
  std::optional<Result> Wait(std::chrono::milliseconds limit) override {
    std::optional<Result> r = call_.WaitFor(limit);
    left_any_ |= !r.has_value();
    return r;
  }

 private:
  UploadFn upload_;
  Clock& clock_;
  std::shared_ptr<std::atomic<bool>> cancel_;
  BackgroundCall<Result> call_;
  bool left_any_ = false;
};

// The Auto Scaling client over the command's transport and credentials,
// made on the first call; every call fails when `aws` is null or names no
// region (as in a drill).
class LazyAutoScaling final : public AutoScalingApi {
 public:
  LazyAutoScaling(AwsEnvironment* aws, Clock& clock) : aws_(aws), clock_(clock) {}
  StatusOr<AutoScalingInstance> DescribeAutoScalingInstance(
      const std::string& instance_id) override;
  Status UpdateAutoScalingGroup(const std::string& group_name,
                                const GroupCapacity& capacity) override;
  Status CompleteLifecycleAction(const std::string& group_name, const std::string& hook_name,
                                 const std::string& instance_id,
                                 LifecycleActionResult result) override;

 private:
  StatusOr<AutoScalingClient*> Client();
  AwsEnvironment* aws_;
  Clock& clock_;
  std::unique_ptr<AutoScalingClient> client_;
};

}  // namespace sg
