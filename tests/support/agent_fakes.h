// Fakes for the agent loop's seams (agent/trainer/job_ports.h): a trainer, a
// checkpoint source, an uploader, the Auto Scaling API and the metadata
// service, all driven by one FakeClock. A FakeJobWorld holds their state
// and a script of steps at fake times; its Idle() is the loop's wait, so the
// whole agent runs single-threaded, in milliseconds, the same way each time.
#pragma once

#include <signal.h>

#include <deque>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/trainer/job_ports.h"
#include "agent/trainer/supervisor.h"
#include "common/imds_client.h"
#include "common/strings.h"
#include "tests/support/fake_clock.h"

namespace sg::testing {

class FakeJobWorld;

class FakeTrainer final : public Trainer {
 public:
  explicit FakeTrainer(FakeJobWorld& world) : world_(world) {}
  bool running() const override { return !exit_.has_value(); }
  std::optional<ExitStatus> Poll() override { return exit_; }
  Status Signal(int signo) override;
  StatusOr<ExitStatus> Stop(int signo, std::chrono::milliseconds grace) override;
  void Exit(ExitStatus status) { exit_ = status; }

 private:
  FakeJobWorld& world_;
  std::optional<ExitStatus> exit_;
};

// The trainers the loop starts.
class FakeLauncher final : public TrainerLauncher {
 public:
  explicit FakeLauncher(FakeJobWorld& world) : world_(world) {}
  StatusOr<std::unique_ptr<Trainer>> Start(const TrainerLaunch& launch) override {
    launches.push_back(launch);
    auto t = std::make_unique<FakeTrainer>(world_);
    trainer = t.get();
    return std::unique_ptr<Trainer>(std::move(t));
  }
  std::vector<TrainerLaunch> launches;
  FakeTrainer* trainer = nullptr;  // the newest; owned by the loop

 private:
  FakeJobWorld& world_;
};

class FakeCheckpoints final : public CheckpointSource {
 public:
  explicit FakeCheckpoints(Clock& clock) : clock_(clock) {}
  // Adds a complete checkpoint at `step`, written now.
  void Write(int64_t step) {
    Checkpoint c;
    c.id = "step_" + std::to_string(step) + ".pt";
    c.step = step;
    c.relpaths = {c.id};
    c.resume = c.id;
    c.newest_mtime = clock_.Now();
    newest_first_.insert(newest_first_.begin(), c);
  }
  int fd() const override { return -1; }
  void Poll() override {}
  StatusOr<std::vector<Checkpoint>> Complete() override { return newest_first_; }
  std::optional<Clock::MonoTime> NextSettle() override { return std::nullopt; }
  bool Writing() override { return writing; }
  void SetUrgent(bool urgent) override {
    if (urgent && !urgent_since) urgent_since = clock_.Monotonic();
    if (!urgent) urgent_since.reset();
  }
  bool writing = false;  // a checkpoint is being written
  // Since when the agent has been waiting for the trainer's answer.
  std::optional<Clock::MonoTime> urgent_since;

 private:
  Clock& clock_;
  std::vector<Checkpoint> newest_first_;
};

// Each upload takes fake time and commits, unless the script says otherwise.
class FakeUploader final : public SnapshotUploader {
 public:
  struct Step {
    std::chrono::milliseconds takes{1000};
    Status fails;        // Ok: the upload commits
    bool hangs = false;  // stuck in a request: neither ends nor hears the cancel
  };
  explicit FakeUploader(Clock& clock) : clock_(clock) {}
  std::deque<Step> script;  // then every upload commits in a second
  std::vector<Checkpoint> started;
  std::vector<Checkpoint> committed;
  int cancels = 0;

  void Start(const Checkpoint& checkpoint) override {
    started.push_back(checkpoint);
    current_ = script.empty() ? Step{} : script.front();
    if (!script.empty()) script.pop_front();
    ends_ = clock_.Monotonic() + current_.takes;
    busy_ = true;
    cancelled_ = false;
  }
  bool busy() const override { return busy_; }
  void Cancel() override {
    ++cancels;
    cancelled_ = true;
  }
  std::optional<Result> Poll() override {
    if (!busy_ || (!cancelled_ && clock_.Monotonic() < ends_)) return std::nullopt;
    return Wait(std::chrono::milliseconds(0));
  }
  std::optional<Result> Wait(std::chrono::milliseconds /*limit*/) override {
    if (!busy_ || current_.hangs) return std::nullopt;
    busy_ = false;
    if (cancelled_) return Result{Status::Cancelled("cancelled"), 0.1};
    if (!current_.fails.ok()) return Result{current_.fails, 1.0};
    committed.push_back(started.back());
    SnapshotResult r;
    r.seq = ++seq_;
    r.bytes = r.stored_bytes = 1000;
    return Result{r, 1.0};
  }

 private:
  Clock& clock_;
  Step current_;
  Clock::MonoTime ends_{};
  bool busy_ = false;
  bool cancelled_ = false;
  uint64_t seq_ = 0;
};

class FakeAutoScaling final : public AutoScalingApi {
 public:
  std::vector<std::string> calls;
  StatusOr<AutoScalingInstance> DescribeAutoScalingInstance(const std::string& id) override {
    calls.push_back("Describe " + id);
    AutoScalingInstance me;
    me.instance_id = id;
    me.group_name = "asg-1";
    return me;
  }
  Status UpdateAutoScalingGroup(const std::string& group, const GroupCapacity& c) override {
    calls.push_back("Update " + group + " min=" + std::to_string(c.min_size.value_or(-1)) +
                    " desired=" + std::to_string(c.desired_capacity.value_or(-1)));
    return Status::Ok();
  }
  Status CompleteLifecycleAction(const std::string& group, const std::string& hook,
                                 const std::string& id, LifecycleActionResult) override {
    calls.push_back("Complete " + group + " " + hook + " " + id);
    return Status::Ok();
  }
};

// The metadata service of a spot instance: no notice until one is posted.
class FakeMetadata final : public MetadataService {
 public:
  explicit FakeMetadata(Clock& clock) : clock_(clock) {}
  // Posts a spot notice whose deadline is `left` from now.
  void PostNotice(std::chrono::seconds left) {
    notice_ =
        nlohmann::json{{"action", "terminate"}, {"time", FormatUtc(clock_.Now() + left)}}.dump();
  }
  // Posts a rebalance recommendation made now.
  void PostRebalance() {
    rebalance_ = nlohmann::json{{"noticeTime", FormatUtc(clock_.Now())}}.dump();
  }
  StatusOr<std::string> Get(std::string_view path) override {
    if (path == "meta-data/spot/instance-action" && notice_) return *notice_;
    if (path == "meta-data/events/recommendations/rebalance" && rebalance_) return *rebalance_;
    if (path == "meta-data/events/maintenance/scheduled") return std::string("[]");
    return Status::NotFound(std::string(path));
  }

 private:
  Clock& clock_;
  std::optional<std::string> notice_, rebalance_;
};

class FakeJobWorld {
 public:
  FakeClock clock;
  FakeLauncher launcher{*this};
  FakeCheckpoints checkpoints{clock};
  FakeUploader uploader{clock};
  FakeAutoScaling autoscaling;
  FakeMetadata imds{clock};
  std::vector<int> signals;  // every signal any trainer got, stops included
  // What a trainer does when signalled (e.g. write a checkpoint a bit later).
  std::function<void(int signo)> on_signal;
  bool stop_requested = false;  // a SIGTERM for the agent

  // Runs `step` once the fake time is `offset` after the world's start.
  void At(std::chrono::milliseconds offset, std::function<void()> step) {
    script_.emplace(start_ + offset, std::move(step));
  }
  std::chrono::milliseconds Elapsed() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(clock.Monotonic() - start_);
  }
  // The loop's wait: time passes, and the steps that are due run.
  void Idle(std::chrono::milliseconds d) {
    clock.Advance(d);
    while (!script_.empty() && script_.begin()->first <= clock.Monotonic()) {
      auto step = std::move(script_.begin()->second);
      script_.erase(script_.begin());
      step();
    }
  }
  AgentPorts Ports() {
    AgentPorts ports;
    ports.trainer = &launcher;
    ports.checkpoints = &checkpoints;
    ports.uploader = &uploader;
    ports.autoscaling = &autoscaling;
    ports.idle = [this](std::chrono::milliseconds d) { Idle(d); };
    ports.stop_requested = [this] { return std::exchange(stop_requested, false); };
    ports.inline_store_work = true;
    return ports;
  }

 private:
  const Clock::MonoTime start_ = clock.Monotonic();
  std::multimap<Clock::MonoTime, std::function<void()>> script_;
};

inline Status FakeTrainer::Signal(int signo) {
  world_.signals.push_back(signo);
  if (world_.on_signal) world_.on_signal(signo);
  return Status::Ok();
}

inline StatusOr<ExitStatus> FakeTrainer::Stop(int signo, std::chrono::milliseconds /*grace*/) {
  world_.signals.push_back(signo);
  if (!exit_) exit_ = ExitStatus{.code = 0, .signal = signo};
  return *exit_;
}

}  // namespace sg::testing
