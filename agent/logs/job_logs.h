// The running agent's side of the logs (docs/design.md §13): opens the
// capture, ships sealed segments every log_ship_interval while the job is
// training and pauses while it ends, and ships the last segments at the
// exit, after the final snapshot. The executor (agent/run/daemon.cc) calls it;
// the decisions about the job stay the policy's.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "agent/config/config.h"
#include "agent/logs/log_capture.h"
#include "agent/logs/log_shipper.h"
#include "common/background_call.h"
#include "common/clock.h"
#include "common/object_store.h"

namespace sg {

class JobLogs {
 public:
  // How long the exit waits for the last segments.
  static constexpr std::chrono::milliseconds kFlushWait{10'000};

  // Everything given must outlive the object. `inline_work`: shipments run
  // on the caller's thread (AgentPorts::inline_store_work).
  JobLogs(const Config& config, ObjectStore& store, Clock& clock, std::string instance,
          bool inline_work)
      : config_(config),
        store_(store),
        clock_(clock),
        instance_(std::move(instance)),
        ship_(inline_work),
        inline_(inline_work) {}

  // Opens the files in LogDirOf(config, env) and taps the agent's log. On
  // failure it says so and captures nothing (the journal still has it all).
  void Open(const std::map<std::string, std::string>& env);
  // Where the trainer's lines go; null when nothing is captured.
  TrainerOutputSink TrainerSink();

  // Every pass of the loop. While `training`, ships every
  // log_ship_interval; once not, a shipment under way stops after its
  // current segment and none starts.
  void Tick(Clock::MonoTime now, bool training, uint64_t generation);

  // At the exit: ships what is left within kFlushWait, and no later than
  // 1 s before `deadline` (a notice's, or SIGTERM's stop_timeout: the exit
  // must meet it), attributed to `generation` (0: the lease was never held,
  // nothing is shipped). Skipped when `store_unanswered` (the exit just gave
  // up on the store) or when no time is left. Returns false when a shipment
  // was left running: it still uses this object.
  bool Flush(uint64_t generation, bool store_unanswered,
             std::optional<Clock::MonoTime> deadline = std::nullopt);

 private:
  void Report(const LogShipResult& r);

  const Config& config_;
  ObjectStore& store_;
  Clock& clock_;
  const std::string instance_;
  std::unique_ptr<LogCapture> capture_;
  std::unique_ptr<LogShipper> shipper_;
  BackgroundCall<LogShipResult> ship_;
  const bool inline_;
  std::shared_ptr<std::atomic<bool>> stop_ = std::make_shared<std::atomic<bool>>(false);
  Clock::MonoTime next_ship_{};
};

}  // namespace sg
