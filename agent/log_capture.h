// The agent's log capture (docs/design.md §13): the trainer's stdout and
// stderr and the agent's own log lines, each time-stamped and labelled,
// written to a bounded set of rotating files under log_dir, from which
// agent/log_shipper.h ships sealed segments to the store.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "agent/config.h"
#include "agent/supervisor.h"
#include "common/clock.h"
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

class LogCapture {
 public:
  // Opens the files in `dir` (LogDirOf); the bound is log_max_mib in 8
  // segments. `clock` must outlive the capture.
  static StatusOr<std::unique_ptr<LogCapture>> Open(const Config& config, const std::string& dir,
                                                    Clock& clock, LogSegmentOptions base = {});
  // Removes the tap when it was set.
  ~LogCapture();

  // From now on a copy of every line of the agent's own log is captured.
  void TapAgentLog();
  // One line of the trainer's output (a TrainerOutputSink).
  void TrainerLine(TrainerStream stream, std::string_view line, bool cut);
  TrainerOutputSink TrainerSink() {
    return [this](TrainerStream s, std::string_view line, bool cut) { TrainerLine(s, line, cut); };
  }

  LogSegments& segments() { return *segments_; }

 private:
  LogCapture(Clock& clock, std::shared_ptr<LogSegments> segments)
      : clock_(clock), segments_(std::move(segments)) {}

  Clock& clock_;
  // Shared with the tap: a thread still logging while the capture is
  // destroyed writes to files that still exist.
  std::shared_ptr<LogSegments> segments_;
  bool tapped_ = false;
};

}  // namespace sg
