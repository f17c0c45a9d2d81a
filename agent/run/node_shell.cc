#include "agent/run/node_shell.h"

#include <poll.h>

#include "agent/config/exit_codes.h"
#include "agent/ledger/events.h"
#include "agent/run/attempt_record.h"
#include "agent/run/job_end.h"
#include "agent/run/job_start.h"
#include "agent/run/retry_budget.h"
#include "agent/run/start_watch.h"
#include "agent/trainer/agent_signals.h"
#include "common/log.h"
#include "common/orphan_reaper.h"
#include "common/signal_names.h"

namespace sg {

NodeShell::NodeShell(const AgentContext& c)
    : c_(c),
      // Tests on a fake clock read on the loop's thread (the world's turns).
      prices_(c.ports.inline_store_work),
      watchdog_(c.notifier) {}

std::optional<NodeShell::Failure> NodeShell::Begin(EventLog& events) {
  const Config& cfg = c_.config;
  events.SetEngineIdentity(cfg.index, cfg.engine_attempt);
  if (auto near = AttemptBudgetWarning(cfg.engine_attempt, cfg.fleet_max_attempts)) {
    LogWarn("{}", *near);  // docs/fleet.md, "Retry budgets"
  }
  if (pid1_) LogInfo("running as PID 1: reaping every orphaned process");
  if (!c_.ports.stop_requested) {
    StatusOr<UniqueFd> fd = BlockStopSignals();
    if (!fd.ok()) return Failure{fd.status(), kExitFailure};
    signal_fd_ = std::move(*fd);
  }
  ClaimedDir claimed = ClaimCheckpointDir(cfg);
  if (!claimed.status.ok()) return Failure{claimed.status, claimed.exit_code};
  host_lock_ = std::move(claimed.lock);
  // Notices are watched for from here on, through the start (docs/design.md §9).
  monitor_ = NewInterruptionMonitor(c_);
  return std::nullopt;
}

void NodeShell::StartPriceRead() {
  std::optional<PriceReaders> readers =
      AgentPriceReaders(c_.ports.prices, c_.aws, c_.clock, c_.identity);
  if (readers) prices_.Start(std::move(*readers), *c_.identity, c_.clock.Now());
}

std::optional<InstancePriceRead::Result> NodeShell::TakePrices(std::chrono::milliseconds wait) {
  std::optional<InstancePriceRead::Result> read = prices_.Take(wait);
  if (read) {
    if (std::string warning = PriceReadWarning(read->details); !warning.empty()) {
      LogWarn("{}", warning);
    }
  }
  return read;
}

void NodeShell::Idle(const CheckpointSource* checkpoints) {
  if (c_.ports.idle) {
    c_.ports.idle(kLoopTick);
    return;
  }
  pollfd fds[2] = {{signal_fd_.get(), POLLIN, 0}, {checkpoints ? checkpoints->fd() : -1, POLLIN, 0}};
  ::poll(fds, checkpoints ? 2 : 1, static_cast<int>(kLoopTick.count()));
  // PID 1 of a container inherits every orphan (docs/design.md §11).
  if (pid1_) ReapOrphanedChildren();
}

bool NodeShell::TakeStopSignal(Trainer* trainer) {
  if (c_.ports.stop_requested) return c_.ports.stop_requested();
  ArrivedSignals arrived = ReadArrivedSignals(signal_fd_.get());
  for (int signo : arrived.forward) {
    if (!trainer || !trainer->running()) {
      LogWarn("received {}; no trainer runs to forward it to", SignalName(signo));
    } else if (Status st = trainer->Signal(signo); st.ok()) {
      LogInfo("received {}; forwarded it to the trainer", SignalName(signo));
    } else {
      LogWarn("received {}; forwarding it to the trainer failed: {}", SignalName(signo),
              st.message());
    }
  }
  return arrived.stop;
}

std::vector<InterruptionEvent> NodeShell::TakeEvents(Clock::MonoTime now) {
  // The metadata service is read on a thread of its own (metadata_poll.h);
  // tests on a fake clock read it on the loop's thread.
  if (!metadata_) {
    metadata_.emplace(monitor_.get(), c_.config.imds.poll_interval,
                      c_.ports.inline_store_work || static_cast<bool>(c_.ports.loop_calls));
  }
  return metadata_->Take(now);
}

void NodeShell::SayReady() {
  if (std::exchange(ready_, true)) return;
  (void)c_.notifier.Notify("READY=1");
}

void NodeShell::SayStopping() {
  if (std::exchange(stopping_, true)) return;
  (void)c_.notifier.Notify("STOPPING=1");
}

void NodeShell::SayStatus(std::string_view status) {
  (void)c_.notifier.Notify("STATUS=" + std::string(status));
}

void NodeShell::Tick(Clock::MonoTime now) {
  if (ready_) watchdog_.Tick(now);
}

int NodeShell::EndComplete(const JobEndContext& end) {
  LogInfo("job {} is already complete; not starting it again", c_.config.job);
  SayReady();
  PerformOnComplete(end);
  return kExitOk;
}

int NodeShell::EndStoppedAtStart(const StartWatch& watch, const JobEndContext& end,
                                 const std::function<void()>& record) {
  SayStopping();
  watch.LogStopped(c_.config.checkpoint_dir);
  if (record) record();
  // The Auto Scaling hook waits for this node's CONTINUE.
  if (watch.notice()) CompleteLifecycleHook(end);
  return kExitInterrupted;  // not done, nothing lost: run it again
}

void NodeShell::FinishTrainers() {
  // What is left of the trainers' groups gets stop_signal, then SIGKILL
  // after stop_grace; no descendant's descriptor is waited for (docs/design.md §11).
  FinishStoppedTrainers();
  if (pid1_) ReapOrphanedChildren();
}

bool NodeShell::FinishReads() {
  // A poll still running uses the monitor (a service that does not answer):
  // briefly waited for, else left to end with the process; so do price reads
  // still running, with their clients.
  const bool poll_left = metadata_ && !metadata_->Finish(kMetadataPollWait);
  return poll_left || prices_.running();
}

void RunNodeLoop(NodeShell& shell, NodeRole& role) {
  while (!role.done()) {
    shell.Idle(role.checkpoints());
    TurnNews news;
    news.stop_signal = shell.TakeStopSignal(role.trainer());
    const Clock::MonoTime now = shell.c_.clock.Monotonic();
    shell.Tick(now);
    role.checkpoints()->Poll();
    news.events = shell.TakeEvents(now);
    role.Turn(now, std::move(news));
  }
}

}  // namespace sg
