// What `spotguard run` does before the trainer starts (docs/design.md §9):
// claim the checkpoint dir on this host, wait for the job's lease, and
// restore the newest good snapshot unless a local checkpoint is as new.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/trainer/agent_signals.h"
#include "agent/config/config.h"
#include "agent/run/daemon.h"
#include "agent/ledger/events.h"
#include "agent/trainer/host_lock.h"
#include "agent/run/interruption_monitor.h"
#include "agent/trainer/job_ports.h"
#include "agent/run/job_policy.h"
#include "agent/repo/lease.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/run/start_watch.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/object_store.h"
#include "common/sd_notify.h"

namespace sg {

// One agent per checkpoint dir on this host (docs/agent.md, "One agent per
// checkpoint directory, and no orphans"): takes the host lock, checks the
// dir, stops what is left of a previous agent's trainer and checks that the
// dir is writable. On failure `exit_code` says how `run` ends.
struct ClaimedDir {
  std::optional<HostLock> lock;
  Status status;
  int exit_code = 0;
};
ClaimedDir ClaimCheckpointDir(const Config& config);

// Waits until the lease is taken. False when `stop_requested` said so
// meanwhile. Logs (once) who holds it.
StatusOr<bool> AwaitLease(LeaseKeeper& lease, std::mutex& lease_mu, const Config& config,
                          const std::string& instance, Clock& clock,
                          const SystemdNotifier& notifier,
                          const std::function<bool()>& stop_requested);

// What both agents' loops run on (single node, and group: agent/group/group_agent.h):
// the staging root of captures (stale captures removed), the checkpoint
// source (the context's, else an inotify watcher it owns). The metadata
// service's monitor is the shell's (agent/run/node_shell.h).
struct LoopParts {
  std::string staging_root;
  std::unique_ptr<CheckpointSource> own_checkpoints;
  CheckpointSource* checkpoints = nullptr;
};
StatusOr<LoopParts> PrepareLoopParts(const AgentContext& c);

// The interruption monitor of `c`'s metadata service; null without one.
std::unique_ptr<InterruptionMonitor> NewInterruptionMonitor(const AgentContext& c);

struct StartPoint {
  RestoredState state;                  // for the policy
  std::optional<int64_t> resumed_step;  // what the trainer starts from
  double restore_seconds = 0;
};

// Whether a job of several nodes may start: when the store holds single-node
// snapshots of it and no group snapshot (the job ran with nodes: 1 before),
// starting the group would begin at step 0. InvalidArgument (exit 2) naming
// group.from_single, unless that is "fresh" (logged).
Status CheckGroupStart(ObjectStore& store, const Config& config);

// A local checkpoint the store lacks is resumed from (and uploaded first);
// otherwise the newest good snapshot is restored into checkpoint_dir, with
// foreign files kept (docs/design.md §7). Once `cancel` (when given) is
// set, a restore in progress gives up (Cancelled): its temporary dir is
// removed, checkpoint_dir left as it was.
// `listed`: the history as the caller listed it after taking the lease (the
// fence was drawn from it); without it, the history is listed here.
StatusOr<StartPoint> RestoreAtStart(ObjectStore& store, Clock& clock, const Config& config,
                                    EventLog& events, const std::atomic<bool>* cancel = nullptr,
                                    std::optional<SnapshotHistory> listed = std::nullopt);

// The start of `run` after the checkpoint dir is claimed: whether the job is
// already complete, the lease, the fence, the restore. Runs on a thread of
// its own while the agent watches for a stop (agent/run/start_watch.h).
struct StartSteps {
  const Config& config;
  ObjectStore& store;
  Clock& clock;
  EventLog& events;
  LeaseKeeper& lease;
  std::mutex& lease_mu;
  const SystemdNotifier& notifier;
  const std::string& instance;
  // Draws the fence after `newest_seq`, the newest seq of the history the
  // start listed. REQUIRES: the lease.
  std::function<Status(uint64_t newest_seq)> draw_fence;
  // Set by RunWatchedStart: a stop was seen, give up; the flag the restore
  // checks.
  std::function<bool()> stopped = [] { return false; };
  const std::atomic<bool>* cancel = nullptr;
};
struct JobStart {
  enum class Outcome {
    kStarted,   // the lease is held and `point` is where the trainer starts
    kComplete,  // the job was complete already: the trainer is not started
    kStopped,   // a stop came first (the lease may be held)
    kFailed,    // `status` says why, `exit_code` how `run` ends
  };
  Outcome outcome = Outcome::kFailed;
  Status status;
  int exit_code = 0;
  StartPoint point;
  // When the lease was taken and the restore began and ended (kStarted):
  // the ledger's times (docs/operations.md, "The ledger").
  std::optional<Clock::WallTime> leased_at, restore_started_at, restore_ended_at;
};
JobStart StartJob(const StartSteps& s);

// Runs StartJob on a thread of its own (on this one when `on_this_thread`:
// it then looks for a stop between its steps), calling `wait` (about a tick)
// and `watch` until it returns. After a stop it is waited for at most
// `give_up_after`; nullopt when it did not return by then: it was left
// running, and the caller must end the process without destroying what the
// steps use.
std::optional<JobStart> RunWatchedStart(StartSteps steps, StartWatch& watch, bool on_this_thread,
                                        const std::function<void()>& wait,
                                        std::chrono::milliseconds give_up_after);

}  // namespace sg
