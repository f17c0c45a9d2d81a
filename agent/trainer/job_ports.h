// The seams of the agent's loop (docs/design.md §9): the trainer, the
// checkpoint source and the snapshot uploader as interfaces, like the Auto
// Scaling client (common/autoscaling_client.h, AutoScalingApi). The product
// uses the real ones (agent/run/job_ports_real.h); the loop's unit tests use
// fakes (tests/support/agent_fakes.h) with a fake clock.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/detect/checkpoint.h"
#include "agent/repo/snapshot_writer.h"
#include "common/autoscaling_client.h"
#include "common/clock.h"
#include "common/pricing_client.h"
#include "common/process.h"
#include "common/spot_price_client.h"
#include "common/status.h"

namespace sg {

struct TrainerLaunch;  // agent/trainer/supervisor.h

// A started trainer.
class Trainer {
 public:
  virtual ~Trainer() = default;
  virtual bool running() const = 0;
  // The exit status once it ended; nullopt while it runs. Never blocks.
  virtual std::optional<ExitStatus> Poll() = 0;
  virtual Status Signal(int signo) = 0;
  // `signo` to the trainer's workers: every process of its group but the
  // trainer itself, which may be a launcher (torchrun) that an unhandled
  // signal would kill; the trainer itself when it is alone in its group.
  virtual Status SignalWorkers(int signo) { return Signal(signo); }
  // `signo` to its process group, SIGKILL after `grace`; how it ended.
  virtual StatusOr<ExitStatus> Stop(int signo, std::chrono::milliseconds grace) = 0;
  // After it ended: whether processes it started are still in its group.
  virtual bool GroupLingers() { return false; }
};

class TrainerLauncher {
 public:
  virtual ~TrainerLauncher() = default;
  virtual StatusOr<std::unique_ptr<Trainer>> Start(const TrainerLaunch& launch) = 0;
};

// Where complete checkpoints come from.
class CheckpointSource {
 public:
  virtual ~CheckpointSource() = default;
  // Readable when there is news (-1: none to wait on).
  virtual int fd() const = 0;
  // Takes in what happened since the last call, without blocking.
  virtual void Poll() = 0;
  // The complete checkpoints now, newest first.
  virtual StatusOr<std::vector<Checkpoint>> Complete() = 0;
  // When something now settling becomes complete; nothing when nothing settles.
  virtual std::optional<Clock::MonoTime> NextSettle() = 0;
  // True while a file in the checkpoint dir is being written or settling.
  virtual bool Writing() = 0;
  // The job is ending and the agent waits for the trainer's answer: a
  // closed file needs only a short quiet time (CheckpointWatcher::SetUrgent).
  virtual void SetUrgent(bool /*urgent*/) {}
  // This node's rank in a multi-node group (CheckpointDetector::SetNodeRank).
  virtual void SetNodeRank(std::optional<int> /*rank*/) {}
};

// One upload at a time, in the background.
class SnapshotUploader {
 public:
  struct Result {
    StatusOr<SnapshotResult> result;
    double seconds = 0;  // from Start to the end
  };
  virtual ~SnapshotUploader() = default;
  // Starts an upload. One still in flight is left to itself: cancelled,
  // never waited for again (its result is lost).
  virtual void Start(const Checkpoint& checkpoint) = 0;
  virtual bool busy() const = 0;
  // Asks the upload in flight to stop before its commit.
  virtual void Cancel() = 0;
  // The result once the upload ended; nullopt while it runs. Never blocks.
  virtual std::optional<Result> Poll() = 0;
  // Waits up to `limit` for the upload in flight to end; nullopt when it
  // has not (it is stuck, e.g. in a request that never answers).
  virtual std::optional<Result> Wait(std::chrono::milliseconds limit) = 0;
};

// How the agent reads its instance's prices for the ledger
// (agent/run/instance_prices.h): EC2's spot price of a type in a zone, the
// Price List's on-demand price of a type in a region. An empty one is not read.
struct PriceReaders {
  std::function<StatusOr<SpotPrice>(const std::string& instance_type, const std::string& zone)>
      spot;
  std::function<StatusOr<OnDemandPrice>(const std::string& instance_type,
                                        const std::string& region)>
      on_demand;
};

// The real parts the loop uses when none are given. The group executor
// (agent/group/group_agent.h) takes them too, all but `uploader` (its parts go up
// through a writer of its own, inline with `inline_store_work`), and
// `loop_calls`.
struct AgentPorts {
  TrainerLauncher* trainer = nullptr;
  CheckpointSource* checkpoints = nullptr;  // else the inotify watcher, once restored
  SnapshotUploader* uploader = nullptr;     // else a thread that captures and writes
  AutoScalingApi* autoscaling = nullptr;    // else the Auto Scaling client, made on first use
  // The instance's prices, read once at start; else the EC2 and Price List
  // clients over the command's AWS parts (none without them).
  std::optional<PriceReaders> prices;
  // Waits up to the given time for news; else poll() on the signal and
  // watcher descriptors.
  std::function<void(std::chrono::milliseconds)> idle;
  // True once a stop (SIGTERM, SIGINT) was asked for; else the agent blocks
  // those signals and reads them from a signalfd.
  std::function<bool()> stop_requested;
  // Run the lease renewal, event records, retention and the release on the
  // loop's thread, not off it: for tests, so that no thread's speed decides
  // what happens when on a fake clock.
  bool inline_store_work = false;
  // The group executor: runs the store calls it makes off its loop
  // (common/loop_calls.h), its part uploads and restores; empty: threads of
  // their own. The fake group world runs them on its own turns
  // (tests/support/fake_group_world.h). Those still held when the agent
  // returns must never run: they use the agent, which is gone then.
  std::function<void(std::function<void()>)> loop_calls;
};

}  // namespace sg
