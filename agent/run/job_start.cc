#include "agent/run/job_start.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "agent/detect/capture.h"
#include "agent/detect/checkpoint_watcher.h"
#include "agent/config/exit_codes.h"
#include "agent/repo/group_store.h"
#include "agent/run/interruption_history.h"
#include "agent/run/job_ports_real.h"
#include "agent/run/local_checkpoint.h"
#include "agent/repo/manifest.h"
#include "agent/detect/presets.h"
#include "agent/repo/progress.h"
#include "agent/repo/quarantine.h"
#include "agent/repo/restorer.h"
#include "agent/repo/round_backups.h"
#include "agent/run/start_watch.h"
#include "agent/repo/repository.h"
#include "agent/run/suspect.h"
#include "agent/trainer/trainer_record.h"
#include "common/background_call.h"
#include "common/files.h"
#include "common/log.h"

namespace sg {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kStartPollTick = milliseconds(100);

}  // namespace

ClaimedDir ClaimCheckpointDir(const Config& config) {
  ClaimedDir claimed;
  auto fail = [&](Status st, int exit_code = kExitFailure) {
    claimed.lock.reset();
    claimed.status = std::move(st);
    claimed.exit_code = exit_code;
    return std::move(claimed);
  };
  const std::string& dir = config.checkpoint_dir;
  auto lock = HostLock::Acquire(dir);
  if (!lock.ok()) {
    if (lock.status().reason() == "Locked") return fail(lock.status(), kExitFenced);
    // The lock file goes beside the dir: a read-only parent is reported the
    // way the writable check reports it.
    if (Status st = CheckWritableDir(dir, "checkpoint_dir " + dir); !st.ok()) return fail(st);
    return fail(lock.status());
  }
  claimed.lock.emplace(std::move(*lock));
  if (Status st = ValidateCheckpointDir(dir); !st.ok()) {
    return fail(st, st.Is(StatusCode::kInvalidArgument) ? kExitUsage : kExitFailure);
  }
  // We hold the lock, so the agent that recorded a trainer is gone: what is
  // left of its trainer is an orphan still writing into the dir.
  auto leftover = StopLeftoverTrainer(
      dir, config.stop_signal, std::min<milliseconds>(config.stop_grace, milliseconds(30'000)));
  if (!leftover.ok()) return fail(leftover.status());
  return claimed;
}

StatusOr<bool> AwaitLease(LeaseKeeper& lease, std::mutex& lease_mu, const Config& config,
                          const std::string& instance, Clock& clock,
                          const SystemdNotifier& notifier,
                          const std::function<bool()>& stop_requested) {
  bool said = false, said_unavailable = false;
  std::optional<Clock::MonoTime> unavailable_since;
  while (true) {
    StatusOr<LeaseKeeper::Attempt> attempt = [&] {
      std::lock_guard<std::mutex> lock(lease_mu);
      return lease.TryAcquire();
    }();
    if (!attempt.ok()) {
      // The store not answering at start is waited for (docs/agent.md, "The start").
      if (!attempt.status().Is(StatusCode::kUnavailable)) return attempt.status();
      if (!unavailable_since) unavailable_since = clock.Monotonic();
      if (clock.Monotonic() - *unavailable_since >= kStartRetryBound) return attempt.status();
      if (!said_unavailable) {
        LogWarn("taking the lease of job {}: {}; trying again every heartbeat for up to {} s",
                config.job, attempt.status().message(),
                duration_cast<seconds>(kStartRetryBound).count());
        said_unavailable = true;
      }
    } else if (attempt->outcome == LeaseKeeper::Outcome::kAcquired) {
      return true;
    } else if (!said) {
      const LeaseState& holder = attempt->current;
      const std::string who =
          holder.instance +
          (holder.agent ? " (agent pid " + std::to_string(holder.agent->pid) + ")" : "");
      LogInfo(
          "job {} is held by {}{} (lease generation {}); waiting for it to be released or "
          "go stale ({}s without renewal)",
          config.job, who, holder.instance == instance ? ", another agent of this instance" : "",
          holder.generation, duration_cast<seconds>(config.lease.timeout).count());
      (void)notifier.Notify("STATUS=waiting for the lease held by " + who);
      said = true;
    }
    // Wait a heartbeat (a tenth of the timeout at most), awake for signals.
    const auto until = clock.Monotonic() +
                       std::min<milliseconds>(config.lease.heartbeat, config.lease.timeout / 10);
    while (clock.Monotonic() < until) {
      if (stop_requested()) return false;
      clock.SleepFor(kStartPollTick);
    }
  }
}

StatusOr<LoopParts> PrepareLoopParts(const AgentContext& c) {
  LoopParts parts;
  SG_ASSIGN_OR_RETURN(parts.staging_root,
                      PrepareStagingRoot(c.config.checkpoint_dir, c.config.job));
  (void)RemoveStaleCaptures(parts.staging_root);
  if (c.ports.checkpoints) {
    parts.checkpoints = c.ports.checkpoints;
  } else {
    SG_ASSIGN_OR_RETURN(parts.own_checkpoints, WatchedCheckpoints::Start(c.config, c.clock));
    parts.checkpoints = parts.own_checkpoints.get();
  }
  return parts;
}

std::unique_ptr<InterruptionMonitor> NewInterruptionMonitor(const AgentContext& c) {
  if (!c.imds) return nullptr;
  InterruptionMonitor::Options options;
  options.poll_interval = c.config.imds.poll_interval;
  return std::make_unique<InterruptionMonitor>(*c.imds, c.clock, options);
}

Status CheckGroupStart(ObjectStore& store, const Config& config) {
  const Repository repo = Repository::Open(store, config.job);
  SG_ASSIGN_OR_RETURN(GroupListing groups, repo.Group().ListGroups());
  if (groups.newest_seq > 0) return Status::Ok();  // a group's job already
  SnapshotCatalog catalog = repo.Catalog();
  SG_ASSIGN_OR_RETURN(std::vector<uint64_t> single, catalog.Committed());
  if (single.empty()) return Status::Ok();
  auto newest = catalog.ReadManifest(single.front());
  const std::string what =
      Format("job {} holds {} single-node snapshot(s) (the newest: {}{}) and no group snapshot",
             config.job, single.size(), SeqName(single.front()),
             newest.ok() && newest->step ? ", step " + std::to_string(*newest->step) : "");
  if (config.group.from_single == FromSingle::kFresh) {
    LogWarn("{}; starting the group of {} nodes fresh, as group.from_single says (the single-node "
            "snapshots stay in the store)",
            what, config.nodes);
    return Status::Ok();
  }
  return Status::InvalidArgument(Format(
      "{}, and this config says nodes: {}: the group would start at step 0. Set "
      "group.from_single to \"fresh\" to start the group anyway (the single-node snapshots "
      "stay), or run the job with nodes: 1 (docs/multi-node.md)",
      what, config.nodes));
}

namespace {

// The history is listed once, now that the lease is held: the fence is
// drawn after its newest seq, and the restore chooses from the same listing
// (docs/design.md §4, "The repository").
Status ListAndFence(const StartSteps& s, Clock::MonoTime give_up_at,
                    std::optional<SnapshotHistory>& history) {
  const Repository repo = Repository::Open(s.store, s.config.job);
  return RetryTransient(
      s.clock, "recording the fence",
      [&]() -> Status {
        auto listed = repo.History();
        if (!listed.ok()) return listed.status();
        history = std::move(*listed);
        return s.draw_fence(history->empty() ? 0 : history->entries.front().seq);
      },
      s.stopped, give_up_at);
}

}  // namespace

JobStart StartJob(const StartSteps& s) {
  JobStart out;
  auto fail = [&](Status st, int exit_code) {
    out.outcome = st.Is(StatusCode::kCancelled) && s.stopped() ? JobStart::Outcome::kStopped
                                                              : JobStart::Outcome::kFailed;
    // A store that did not answer for the whole bound: nothing was done and
    // nothing is lost, and another attempt may find it answering (exit 75,
    // docs/design.md §2).
    out.exit_code = st.Is(StatusCode::kUnavailable) ? kExitInterrupted : exit_code;
    out.status = std::move(st);
    return out;
  };
  const Clock::MonoTime give_up_at = s.clock.Monotonic() + kStartRetryBound;
  bool complete = false;
  Status st = RetryTransient(
      s.clock, "reading whether job " + s.config.job + " is complete",
      [&]() -> Status {
        auto marker = Repository::Open(s.store, s.config.job).IsComplete();
        complete = marker.ok() && *marker;
        return marker.status();
      },
      s.stopped, give_up_at);
  if (!st.ok()) return fail(st, kExitFailure);
  if (complete) {
    out.outcome = JobStart::Outcome::kComplete;
    return out;
  }
  // A trainer that cannot write checkpoints, and a restore that cannot
  // write files, are no use: say so before taking the job's lease.
  const std::string& dir = s.config.checkpoint_dir;
  if (st = CheckWritableDir(dir, "checkpoint_dir " + dir); !st.ok()) return fail(st, kExitFailure);
  auto leased = AwaitLease(s.lease, s.lease_mu, s.config, s.instance, s.clock, s.notifier,
                           s.stopped);
  if (!leased.ok()) return fail(leased.status(), kExitFailure);
  if (!*leased) {
    out.outcome = JobStart::Outcome::kStopped;
    return out;
  }
  out.leased_at = s.clock.Now();
  std::optional<SnapshotHistory> history;
  st = ListAndFence(s, give_up_at, history);
  if (!st.ok()) return fail(st, kExitFailure);
  if (s.stopped()) {
    out.outcome = JobStart::Outcome::kStopped;
    return out;
  }
  out.restore_started_at = s.clock.Now();
  st = RetryTransient(
      s.clock, "restoring job " + s.config.job,
      [&]() -> Status {
        // A retry lists the history again.
        auto point = RestoreAtStart(s.store, s.clock, s.config, s.events, s.cancel,
                                    std::exchange(history, std::nullopt));
        if (point.ok()) out.point = std::move(*point);
        return point.status();
      },
      s.stopped, s.clock.Monotonic() + kStartRetryBound);
  if (!st.ok()) {
    return fail(st, st.Is(StatusCode::kInvalidArgument) ? kExitUsage : kExitFailure);
  }
  out.restore_ended_at = s.clock.Now();
  if (s.config.checkpoint_cadence.automatic) {
    // History, for the cadence's MTBF: without it, the prior serves.
    auto history = ReadInterruptionHistory(s.store, s.config.job, s.clock.Now());
    if (history.ok()) {
      out.point.state.history = *history;
    } else {
      LogWarn("reading the job's interruption history failed ({}); the cadence starts from "
              "checkpoint_cadence.mtbf",
              history.status().message());
    }
  }
  out.outcome = s.stopped() ? JobStart::Outcome::kStopped : JobStart::Outcome::kStarted;
  return out;
}

std::optional<JobStart> RunWatchedStart(StartSteps steps, StartWatch& watch, bool on_this_thread,
                                        const std::function<void()>& wait,
                                        std::chrono::milliseconds give_up_after) {
  steps.stopped = on_this_thread ? std::function<bool()>([&watch] { return watch.Check(); })
                                 : std::function<bool()>([&watch] { return watch.stopped(); });
  steps.cancel = &watch.cancel();
  BackgroundCall<JobStart> start(on_this_thread);
  start.Start([steps] { return StartJob(steps); });
  std::optional<Clock::MonoTime> give_up_at;
  while (true) {
    if (std::optional<JobStart> done = start.Poll()) return done;
    wait();
    if (watch.Check() && !give_up_at) give_up_at = steps.clock.Monotonic() + give_up_after;
    if (give_up_at && steps.clock.Monotonic() >= *give_up_at) return std::nullopt;
  }
}

}  // namespace sg
