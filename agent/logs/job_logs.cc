#include "agent/logs/job_logs.h"

#include "common/duration.h"
#include "common/log.h"

namespace sg {

void JobLogs::Open(const std::map<std::string, std::string>& env) {
  auto capture = LogCapture::Open(config_, LogDirOf(config_, env), clock_);
  if (!capture.ok()) {
    LogWarn("the logs are not captured (the trainer's output still reaches the journal): {}",
            capture.status().message());
    return;
  }
  capture_ = std::move(*capture);
  capture_->TapAgentLog();
  shipper_ = std::make_unique<LogShipper>(store_, capture_->segments(), config_.job, instance_);
  LogInfo("capturing the logs in {} (shipped every {})", capture_->segments().dir(),
          FormatDuration(config_.log_ship_interval));
}

TrainerOutputSink JobLogs::TrainerSink() { return capture_ ? capture_->TrainerSink() : nullptr; }

void JobLogs::Tick(Clock::MonoTime now, bool training, uint64_t generation) {
  if (!shipper_) return;
  if (ship_.busy()) {
    if (auto r = ship_.Poll()) Report(*r);
  }
  // Never while the job is ending: its final snapshot has the store to
  // itself.
  if (!training) {
    *stop_ = true;
    return;
  }
  if (ship_.busy() || now < next_ship_) return;
  const bool first_look = next_ship_ == Clock::MonoTime{};
  next_ship_ = now + config_.log_ship_interval;
  if (first_look) return;  // the first shipment one interval from the start
  ship_.Start([this, stop = stop_, generation] {
    return shipper_->Ship(generation, /*seal=*/true, stop.get());
  });
}

void JobLogs::Report(const LogShipResult& r) {
  if (r.shipped > 0) {
    LogDebug("shipped {} log segment(s), {} bytes ({} stored), newest {}", r.shipped, r.bytes,
             r.stored_bytes, r.newest_key);
  }
  if (!r.status.ok()) LogWarn("shipping the logs failed (will retry): {}", r.status.message());
}

bool JobLogs::Flush(uint64_t generation, bool store_unanswered,
                    std::optional<Clock::MonoTime> deadline) {
  if (!shipper_ || generation == 0) return true;
  const std::string& dir = capture_->segments().dir();
  if (store_unanswered) {
    // Waiting for the store again would only delay the exit.
    LogWarn("the store did not answer; the last log lines stay in {}", dir);
    return true;
  }
  // What the exit may still spend: kFlushWait, and never the deadline.
  const Clock::MonoTime until = [&] {
    Clock::MonoTime u = clock_.Monotonic() + kFlushWait;
    if (deadline) u = std::min(u, *deadline - std::chrono::seconds(1));
    return u;
  }();
  const auto left = [&] {
    return std::max(
        std::chrono::milliseconds(0),
        std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_.Monotonic()));
  };
  if (left().count() == 0) {
    LogWarn("no time is left before the deadline to ship logs; the last log lines stay in {}", dir);
    return !ship_.busy();
  }
  if (ship_.busy()) {
    auto r = ship_.WaitFor(left());
    if (!r) {
      LogWarn("a log shipment still hangs on the store; the last log lines stay in {}", dir);
      return false;
    }
    Report(*r);
  }
  // Said before the drain, so that this line is in the last segment too.
  LogInfo("shipping the last log segments to the store");
  // The lines queued for the files go in first (unless the log disk hangs).
  if (!capture_->Drain(left())) {
    LogWarn("the log files in {} take no more lines (a hung disk?); the last lines are not shipped",
            dir);
  }
  const LogSegmentStats stats = capture_->segments().stats();
  if (stats.dropped_lines > 0 || stats.unshipped_removed > 0) {
    LogWarn(
        "log capture lost {} line(s) ({} bytes) to write failures and {} segment(s) rotated away "
        "before they were shipped",
        stats.dropped_lines, stats.dropped_bytes, stats.unshipped_removed);
  }
  // On a thread of its own, so that a store that hangs costs kFlushWait at most.
  BackgroundCall<LogShipResult> last(inline_);
  last.Start([this, generation] { return shipper_->Ship(generation, /*seal=*/true); });
  auto r = last.WaitFor(left());
  if (!r) {
    LogWarn("the last log segments did not reach the store in the time left; they stay in {}", dir);
    return false;
  }
  Report(*r);
  if (r->status.ok() && !r->newest_key.empty()) {
    LogInfo("the logs are in the store up to {}", r->newest_key);
  }
  return true;
}

}  // namespace sg
