// What `spotguard run` does before the trainer starts (docs/design.md §9):
// claim the checkpoint dir on this host, wait for the job's lease, and
// restore the newest good snapshot unless a local checkpoint is as new.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/config.h"
#include "agent/daemon.h"
#include "agent/events.h"
#include "agent/host_lock.h"
#include "agent/interruption_monitor.h"
#include "agent/job_ports.h"
#include "agent/job_policy.h"
#include "agent/lease.h"
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

// SIGTERM and SIGINT blocked in every thread (call before any thread
// starts) and delivered through the returned signalfd instead.
StatusOr<UniqueFd> BlockStopSignals();
// Reads what `signal_fd` holds; true when a stop signal arrived (each logged).
bool StopSignalArrived(int signal_fd);

// What both agents' loops run on (single node, and group: agent/group_agent.h):
// the staging root of captures (stale captures removed), the checkpoint
// source (the context's, else an inotify watcher it owns) and the
// interruption monitor (none without a metadata service).
struct LoopParts {
  std::string staging_root;
  std::unique_ptr<CheckpointSource> own_checkpoints;
  CheckpointSource* checkpoints = nullptr;
  std::unique_ptr<InterruptionMonitor> monitor;
};
StatusOr<LoopParts> PrepareLoopParts(const AgentContext& c);

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
// foreign files kept (docs/design.md §7).
StatusOr<StartPoint> RestoreAtStart(ObjectStore& store, Clock& clock, const Config& config,
                                    EventLog& events);

}  // namespace sg
