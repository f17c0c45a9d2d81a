// The agent's log capture (docs/design.md §13): the trainer's stdout and
// stderr and the agent's own log lines, each time-stamped and labelled,
// written to a bounded set of rotating files under log_dir, from which
// agent/logs/log_shipper.h ships sealed segments to the store.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "agent/config/config.h"
#include "agent/trainer/supervisor.h"
#include "common/clock.h"
#include "common/log_queue.h"
#include "common/log_segments.h"

namespace sg {

// log_dir; when not configured, "$LOGS_DIRECTORY/<job>" under systemd
// (LogsDirectory=spotguard: /var/log/spotguard/<job>), else
// "<parent of checkpoint_dir>/.spotguard-logs-<job>" (beside the notice
// file, so it works without privileges).
std::string LogDirOf(const Config& config, const std::map<std::string, std::string>& env);

// The labels of the lines (the second field of a line).
inline constexpr std::string_view kAgentSource = "agent";
inline constexpr std::string_view kTrainerOutSource = "trainer.out";
inline constexpr std::string_view kTrainerErrSource = "trainer.err";

// Lines reach the files through a bounded queue written by a thread of its
// own (common/log_queue.h), so a log disk that hangs never blocks whoever
// logs: the agent's lines are dropped (and counted, then reported) when the
// queue is full, and the trainer's lines wait for room on the forwarder's
// thread (TrainerOutputSink).
class LogCapture {
 public:
  // Bytes of lines waiting for the log files.
  static constexpr size_t kQueueBytes = size_t{1} << 20;

  // Opens the files in `dir` (LogDirOf); the bound is log_max_mib in 8
  // segments. `clock` must outlive the capture.
  static StatusOr<std::unique_ptr<LogCapture>> Open(const Config& config, const std::string& dir,
                                                    Clock& clock, LogSegmentOptions base = {});
  // Removes the tap when it was set.
  ~LogCapture();

  // From now on a copy of every line of the agent's own log is captured.
  void TapAgentLog();
  // One line of the trainer's output (a TrainerOutputSink).
  bool TrainerLine(TrainerStream stream, std::string_view line, bool cut, bool may_wait);
  TrainerOutputSink TrainerSink() {
    return [this](TrainerStream s, std::string_view line, bool cut, bool may_wait) {
      return TrainerLine(s, line, cut, may_wait);
    };
  }
  // Waits until the lines captured so far are in the files; false once the
  // files took no line for `stall`.
  bool Drain(std::chrono::milliseconds stall) { return queue_->Drain(stall); }

  LogSegments& segments() { return *segments_; }

 private:
  LogCapture(Clock& clock, std::shared_ptr<LogSegments> segments);

  Clock& clock_;
  // Shared with the queue's thread: it may still write after the capture is
  // destroyed, to files that still exist.
  std::shared_ptr<LogSegments> segments_;
  // Shared with the tap: a thread still logging while the capture is
  // destroyed queues to a queue that still exists.
  std::shared_ptr<LogQueue> queue_;
  bool tapped_ = false;
};

}  // namespace sg
