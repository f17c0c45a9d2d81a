// Logging for operators: one line per event to stderr, as text or as JSON
// lines. The only place that includes spdlog; the rest of the code calls
// the functions below.
#pragma once

#include <spdlog/spdlog.h>

#include <functional>
#include <string_view>

#include "common/status.h"

namespace sg {

enum class LogFormat { kText, kJson };
enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

StatusOr<LogLevel> ParseLogLevel(std::string_view name);
StatusOr<LogFormat> ParseLogFormat(std::string_view name);
std::string_view LogLevelName(LogLevel level);

// Sets the process-wide logger. Safe to call again (e.g. after the config is
// read) to change format or level.
void InitLogging(LogLevel level, LogFormat format);

// A copy of every line logged from now on goes to `tap` too (time in UTC
// with milliseconds, level name, message), e.g. into the agent's log files
// (docs/design.md §13). Lines logged from inside `tap` itself are not passed
// to it again. An empty function removes the tap.
using LogTap = std::function<void(std::string_view time_utc, std::string_view level,
                                  std::string_view message)>;
void SetLogTap(LogTap tap);

// Logs `message` at info level to stderr only, not to the tap: for lines the
// tap's owner has already captured (the trainer's output).
void LogInfoUntapped(std::string_view message);

// Formats a JSON log line; exposed for tests.
std::string FormatJsonLogLine(std::string_view time_utc, std::string_view level,
                              std::string_view message);

// A line formatted the way the Log* functions format theirs, for code that
// decides what to say without saying it (agent/run/job_policy.h).
template <typename... Args>
std::string Format(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  return spdlog::fmt_lib::format(fmt, std::forward<Args>(args)...);
}

template <typename... Args>
void LogTrace(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::trace(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void LogDebug(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::debug(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void LogInfo(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::info(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void LogWarn(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::warn(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void LogError(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::error(fmt, std::forward<Args>(args)...);
}

}  // namespace sg
