// What every node's agent does the same way, alone or in a group
// (docs/design.md §9, "One loop for every node"): the setup before the job's
// own start (the engine's identity, the signals, the checkpoint dir's host
// lock, the metadata service), the loop's turn (the wait, the stop signals
// and those forwarded to the trainer, the watchdog, the notices), systemd's
// READY=1 and STOPPING=1, the instance's prices, the two early ends (a job
// already complete, a stop during the start) and the exit's last waits.
//
// The loop itself is RunNodeLoop: one node's executor (agent/run/daemon_agent.h)
// and a group member's (agent/group/group_agent_impl.h) are its two roles.
#pragma once

#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "agent/detect/checkpoint_watcher.h"
#include "agent/run/daemon.h"
#include "agent/run/exit_bound.h"
#include "agent/run/instance_prices.h"
#include "agent/run/interruption_monitor.h"
#include "agent/run/metadata_poll.h"
#include "agent/trainer/host_lock.h"
#include "agent/trainer/supervisor.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/sd_notify.h"
#include "common/status.h"

namespace sg {

class EventLog;
class StartWatch;
struct JobEndContext;

// One turn of the loop waits this long at most for a signal or a checkpoint.
inline constexpr std::chrono::milliseconds kLoopTick{100};
// What one turn read for the role: a stop signal (SIGTERM, SIGINT, SIGQUIT)
// and the metadata service's events (notices, rebalance recommendations),
// in the order read.
struct TurnNews {
  bool stop_signal = false;
  std::vector<InterruptionEvent> events;
};

// A coordination around the node's trainer that the one loop turns: solo
// (the lease, the fence, JobPolicy) or group (the round protocol, GroupPolicy).
class NodeRole {
 public:
  virtual ~NodeRole() = default;
  virtual bool done() const = 0;
  // Where forwarded signals (SIGUSR1, SIGUSR2, SIGHUP) go; null when no
  // trainer runs.
  virtual Trainer* trainer() = 0;
  virtual CheckpointSource* checkpoints() = 0;
  // One turn, with what it read.
  virtual void Turn(Clock::MonoTime now, TurnNews news) = 0;
};

class NodeShell {
 public:
  explicit NodeShell(const AgentContext& c);

  // The setup before the job's own start: the engine's identity on the
  // events, the signals blocked (before any thread starts, so that each
  // inherits the mask), the checkpoint dir claimed on this host and the
  // metadata service's monitor. A failure gives its exit code.
  struct Failure {
    Status status;
    int exit_code;
  };
  std::optional<Failure> Begin(EventLog& events);

  // Starts the reads of the instance's prices, off the loop.
  void StartPriceRead();
  // Their result once, with a warning logged; `wait` > 0 waits for it.
  std::optional<InstancePriceRead::Result> TakePrices(
      std::chrono::milliseconds wait = std::chrono::milliseconds(0));

  // A turn's wait: up to a tick for a signal or for `checkpoints`' dir (null:
  // the signals only); the ports' idle in tests. As PID 1 it reaps orphans.
  void Idle(const CheckpointSource* checkpoints);
  // True when a stop signal arrived since the last call. Signals to forward
  // go to `trainer` when it runs; otherwise they are logged and dropped.
  bool TakeStopSignal(Trainer* trainer);
  // What the metadata service said since the last turn (a poll that ended);
  // starts the next poll when one is due. Never waits for the service.
  std::vector<InterruptionEvent> TakeEvents(Clock::MonoTime now);

  // systemd: each said once. WATCHDOG=1 is sent by the turns once READY=1 was.
  void SayReady();
  void SayStopping();
  void SayStatus(std::string_view status);

  // The two ends before a trainer started. A job already complete: READY=1,
  // on_complete, exit 0. A stop during the start: STOPPING=1, what was left
  // logged, `record` (the role's events), the lifecycle action completed on
  // a notice; exit 75.
  int EndComplete(const JobEndContext& end);
  int EndStoppedAtStart(const StartWatch& watch, const JobEndContext& end,
                        const std::function<void()>& record = {});

  // The exit's last steps. FinishTrainers: what is left of the trainers'
  // groups stopped and finished, orphans reaped (PID 1). FinishReads: a
  // metadata poll still running waited for briefly; true when a thread was
  // left running (a poll, price reads), so that the process must end
  // without destroying what they use.
  void FinishTrainers();
  bool FinishReads();

  InterruptionMonitor* monitor() { return monitor_.get(); }
  bool pid1() const { return pid1_; }

 private:
  friend void RunNodeLoop(NodeShell& shell, NodeRole& role);

  void Tick(Clock::MonoTime now);  // WATCHDOG=1, once ready

  const AgentContext& c_;
  UniqueFd signal_fd_;
  std::optional<HostLock> host_lock_;  // held for the whole run
  std::unique_ptr<InterruptionMonitor> monitor_;
  std::optional<MetadataPoll> metadata_;  // made by the first turn
  InstancePriceRead prices_;
  WatchdogPinger watchdog_;
  bool ready_ = false;
  bool stopping_ = false;
  const bool pid1_ = ::getpid() == 1;  // the first process of a PID namespace
};

// The one loop (docs/design.md §9): until the role is done, each turn waits
// (NodeShell::Idle), reads the stop signals, the checkpoint dir and the
// metadata service, feeds the watchdog, and turns the role with what it read.
void RunNodeLoop(NodeShell& shell, NodeRole& role);

}  // namespace sg
