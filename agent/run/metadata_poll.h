// The metadata service read off the loop (docs/design.md §10): one poll of
// every source at a time, started when one is due and taken by the loop when
// it has ended. A service that answers slowly, or not at all (a container
// whose IMDS hop limit drops the answers), then holds a thread, never the
// loop that feeds systemd's watchdog, reads signals and stops the trainer.
// Both executors (one node, a group) read notices through it.
#pragma once

#include <chrono>
#include <vector>

#include "agent/run/interruption_monitor.h"
#include "common/background_call.h"
#include "common/clock.h"

namespace sg {

// How long an executor's exit waits for a poll still running before it
// leaves it to end with the process.
constexpr std::chrono::milliseconds kMetadataPollWait{1000};

class MetadataPoll {
 public:
  // `monitor` may be null (IMDS disabled): nothing is ever read. It must
  // outlive the poll, or the process must end without destroying it while
  // running() (AgentResult::abandoned). `run_inline`: each poll runs on the
  // caller's thread (for tests on a fake clock).
  MetadataPoll(InterruptionMonitor* monitor, Duration interval, bool run_inline);

  // Called every turn of the loop: the events of a poll that has ended
  // (none otherwise), then a new poll started when `interval` has passed
  // since the last one started. Never waits for the service.
  std::vector<InterruptionEvent> Take(Clock::MonoTime now);

  // A poll was started and has not been taken.
  bool running() const { return call_.busy(); }
  // At the exit: waits up to `limit` for a poll still running. False when it
  // still runs: its thread uses the monitor.
  bool Finish(std::chrono::milliseconds limit);

 private:
  InterruptionMonitor* const monitor_;
  const Duration interval_;
  BackgroundCall<std::vector<InterruptionEvent>> call_;
  Clock::MonoTime next_{};  // the clock's epoch: the first turn polls
};

}  // namespace sg
