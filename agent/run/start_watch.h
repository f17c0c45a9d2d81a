// The start of a job (lease, restore: agent/run/job_start.h) is watched like the
// loop that follows it (docs/design.md §9, "The start"): the stop signals
// and the metadata service's notices are read from the moment the agent
// starts, and a stop cancels what the start is doing. And a store that does
// not answer at start is waited for, a bounded time.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/run/interruption_monitor.h"
#include "common/clock.h"
#include "common/status.h"

namespace sg {

class StartWatch {
 public:
  // `stop_signal`: true when a stop signal arrived since the last call.
  // `monitor` (null: no metadata service) is read once per `poll_interval`.
  StartWatch(Clock& clock, std::function<bool()> stop_signal, InterruptionMonitor* monitor,
             std::chrono::milliseconds poll_interval);

  // Looks for a stop once. True once a stop was seen, and from then on; the
  // flag `cancel()` is set then. Call from one thread at a time.
  bool Check();
  // Set once a stop was seen: what the start runs (the restore's reads)
  // checks it and gives up.
  const std::atomic<bool>& cancel() const { return cancel_; }
  bool stopped() const { return cancel_.load(); }
  // The notice that stopped the start, when a notice did.
  const std::optional<InterruptionEvent>& notice() const { return notice_; }
  // The other events read meanwhile (a rebalance recommendation, ...): the
  // job's policy gets them once the trainer runs.
  std::vector<InterruptionEvent> TakeOthers() { return std::move(others_); }
  // Logs what a stop during the start left: `checkpoint_dir` as it was, the
  // store's snapshots, and the exit (75). Both executors' line.
  void LogStopped(const std::string& checkpoint_dir) const;

 private:
  Clock& clock_;
  const std::function<bool()> stop_signal_;
  InterruptionMonitor* const monitor_;
  const std::chrono::milliseconds poll_interval_;
  std::optional<Clock::MonoTime> next_poll_;
  std::atomic<bool> cancel_{false};
  std::optional<InterruptionEvent> notice_;
  std::vector<InterruptionEvent> others_;
};

// How long transient failures of the store (Unavailable: refused, reset,
// no answer, 5xx after the client's own retries) are retried at start
// before the agent gives up with exit 75 (docs/agent.md, "The start").
inline constexpr std::chrono::milliseconds kStartRetryBound{300'000};

// Runs `step` until it succeeds, fails with anything but Unavailable, `stop`
// says so (Cancelled), or `give_up_at` has passed (its last error). The
// waits between tries grow from 1 s to 30 s and are cut short by `stop`.
Status RetryTransient(Clock& clock, std::string_view what, const std::function<Status()>& step,
                      const std::function<bool()>& stop, Clock::MonoTime give_up_at);

}  // namespace sg
