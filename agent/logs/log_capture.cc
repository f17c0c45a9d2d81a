#include "agent/logs/log_capture.h"

#include "common/files.h"
#include "common/log.h"
#include "common/log_lines.h"

namespace sg {

std::string LogDirOf(const Config& config, const std::map<std::string, std::string>& env) {
  if (!config.log_dir.empty()) return config.log_dir;
  if (auto it = env.find("LOGS_DIRECTORY"); it != env.end() && !it->second.empty()) {
    // systemd may list several, separated by ':'; the first is ours.
    return it->second.substr(0, it->second.find(':')) + "/" + config.job;
  }
  return DirName(config.checkpoint_dir) + "/.spotguard-logs-" + config.job;
}

StatusOr<std::unique_ptr<LogCapture>> LogCapture::Open(const Config& config, const std::string& dir,
                                                       Clock& clock, LogSegmentOptions base) {
  constexpr int kSegments = 8;
  base.dir = dir;
  base.max_segments = kSegments;
  base.segment_bytes = (static_cast<uint64_t>(config.log_max_mib) << 20) / kSegments;
  SG_ASSIGN_OR_RETURN(std::unique_ptr<LogSegments> segments, LogSegments::Open(std::move(base)));
  // Reported through the journal only: the capture cannot take the line.
  segments->set_on_drop([](const std::string& what) { LogInfoUntapped("warning: " + what); });
  return std::unique_ptr<LogCapture>(
      new LogCapture(clock, std::shared_ptr<LogSegments>(std::move(segments))));
}

LogCapture::LogCapture(Clock& clock, std::shared_ptr<LogSegments> segments)
    : clock_(clock), segments_(std::move(segments)) {
  queue_ = std::make_shared<LogQueue>(LogQueue::Options{
      .max_bytes = kQueueBytes,
      .write = [segments = segments_](std::string_view line) { segments->Append(line); },
      .write_now = nullptr,
      .on_dropped = [](uint64_t n) { LogWarn("{} log lines dropped: log_dir was blocked", n); },
  });
}

LogCapture::~LogCapture() {
  if (tapped_) SetLogTap(nullptr);
  // The last lines ("exiting ...") reach the files before the process ends,
  // unless the log disk took nothing for a second.
  (void)queue_->Drain(std::chrono::seconds(1));
}

void LogCapture::TapAgentLog() {
  tapped_ = true;
  SetLogTap(
      [queue = queue_](std::string_view time, std::string_view level, std::string_view message) {
        std::string text(level);
        text += ' ';
        // An agent's line is one line; a multi-line message stays one.
        text += EscapeLogText(message);
        // Never waits: the loop and the notice path log through here.
        queue->Push(FormatLogLine(time, kAgentSource, text));
      });
}

bool LogCapture::TrainerLine(TrainerStream stream, std::string_view line, bool cut, bool may_wait) {
  std::string text = EscapeLogText(line);
  if (cut) text.append(kCutMark);
  const std::string formatted =
      FormatLogLine(FormatUtc(clock_.Now(), /*millis=*/true),
                    stream == TrainerStream::kStdout ? kTrainerOutSource : kTrainerErrSource, text);
  if (queue_->Push(formatted, may_wait ? LogQueue::WhenFull::kRefuse : LogQueue::WhenFull::kDrop)) {
    return true;
  }
  return !may_wait;
}

}  // namespace sg
