#include "common/log.h"

#include <spdlog/formatter.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/log_queue.h"
#include "common/strings.h"

namespace sg {
namespace {

constexpr std::pair<std::string_view, LogLevel> kLevels[] = {
    {"trace", LogLevel::kTrace}, {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo},
    {"warn", LogLevel::kWarn},   {"error", LogLevel::kError}, {"off", LogLevel::kOff}};

spdlog::level::level_enum ToSpd(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

std::string_view SpdLevelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warn";
    case spdlog::level::err:
      return "error";
    case spdlog::level::critical:
      return "critical";
    default:
      return "off";
  }
}

// {"time":"2026-11-22T08:22:00.123Z","level":"info","msg":"..."} per line.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string line =
        FormatJsonLogLine(FormatUtc(msg.time, /*millis=*/true), SpdLevelName(msg.level),
                          std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

std::mutex tap_mu;
std::shared_ptr<const LogTap> tap;  // guarded by tap_mu
thread_local bool in_tap = false;   // inside the tap, or logging untapped

class TapSink final : public spdlog::sinks::sink {
 public:
  void log(const spdlog::details::log_msg& msg) override {
    if (in_tap) return;
    std::shared_ptr<const LogTap> t;
    {
      std::lock_guard<std::mutex> lock(tap_mu);
      t = tap;
    }
    if (!t) return;
    in_tap = true;
    (*t)(FormatUtc(msg.time, /*millis=*/true), SpdLevelName(msg.level),
         std::string_view(msg.payload.data(), msg.payload.size()));
    in_tap = false;
  }
  void flush() override {}
  void set_pattern(const std::string&) override {}
  void set_formatter(std::unique_ptr<spdlog::formatter>) override {}
};

// The one queue in front of fd 2, shared by every logger InitLogging makes
// and never destroyed: its thread may be stuck in a write at the exit.
LogQueue& StderrQueue() {
  static LogQueue* queue = new LogQueue(LogQueue::Options{
      .max_bytes = kStderrQueueBytes,
      .write = [](std::string_view line) { WriteLineToFd(STDERR_FILENO, line); },
      .write_now = [](std::string_view line) { return WriteLineToFdNow(STDERR_FILENO, line); },
      .on_dropped = [](uint64_t n) { LogWarn("{} log lines dropped: stderr was blocked", n); },
  });
  return *queue;
}

// Formats as spdlog's sinks do and hands the line to StderrQueue: a logger
// never waits for whoever reads stderr (docs/design.md §13).
class StderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    StderrQueue().Push(std::string_view(buf.data(), buf.size()));
  }
  void flush_() override {}
};

}  // namespace

bool FlushStderr(std::chrono::milliseconds stall) { return StderrQueue().Drain(stall); }

void SetLogTap(LogTap t) {
  std::lock_guard<std::mutex> lock(tap_mu);
  tap = t ? std::make_shared<const LogTap>(std::move(t)) : nullptr;
}

void LogInfoUntapped(std::string_view message) {
  const bool was = in_tap;
  in_tap = true;
  spdlog::info("{}", message);
  in_tap = was;
}

StatusOr<LogLevel> ParseLogLevel(std::string_view name) {
  const std::string lowered = ToLower(name);
  for (const auto& [n, level] : kLevels) {
    if (n == lowered) return level;
  }
  return Status::InvalidArgument("unknown log level \"" + std::string(name) +
                                 "\" (trace, debug, info, warn, error, off)");
}

std::string_view LogLevelName(LogLevel level) {
  for (const auto& [n, l] : kLevels) {
    if (l == level) return n;
  }
  return "info";
}

StatusOr<LogFormat> ParseLogFormat(std::string_view name) {
  const std::string lowered = ToLower(name);
  if (lowered == "text") return LogFormat::kText;
  if (lowered == "json") return LogFormat::kJson;
  return Status::InvalidArgument("unknown log format \"" + std::string(name) + "\" (text, json)");
}

std::string FormatJsonLogLine(std::string_view time_utc, std::string_view level,
                              std::string_view message) {
  nlohmann::ordered_json j;
  j["time"] = time_utc;
  j["level"] = level;
  j["msg"] = message;
  // Invalid UTF-8 (a path with odd bytes) is replaced rather than aborting.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void InitLogging(LogLevel level, LogFormat format) {
  auto sink = std::make_shared<StderrSink>();
  if (format == LogFormat::kJson) {
    sink->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    sink->set_formatter(std::make_unique<spdlog::pattern_formatter>(
        "%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc));
  }
  spdlog::sinks_init_list sinks = {sink, std::make_shared<TapSink>()};
  auto logger = std::make_shared<spdlog::logger>("spotguard", sinks);
  logger->set_level(ToSpd(level));
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace sg
