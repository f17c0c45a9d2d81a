#include "agent/run/start_watch.h"

#include <algorithm>

#include "agent/config/exit_codes.h"
#include "common/log.h"

namespace sg {

using std::chrono::milliseconds;

StartWatch::StartWatch(Clock& clock, std::function<bool()> stop_signal,
                       InterruptionMonitor* monitor, milliseconds poll_interval)
    : clock_(clock),
      stop_signal_(std::move(stop_signal)),
      monitor_(monitor),
      poll_interval_(poll_interval) {}

bool StartWatch::Check() {
  if (cancel_.load()) return true;
  if (stop_signal_ && stop_signal_()) {
    cancel_ = true;
    return true;
  }
  const Clock::MonoTime now = clock_.Monotonic();
  if (!monitor_ || (next_poll_ && now < *next_poll_)) return false;
  next_poll_ = now + poll_interval_;
  for (InterruptionEvent& e : monitor_->PollOnce()) {
    if (e.IsNotice() && !notice_) {
      LogWarn("INTERRUPTION NOTICE before the trainer started: {}", e.Describe());
      notice_ = std::move(e);
      cancel_ = true;
    } else {
      others_.push_back(std::move(e));
    }
  }
  return cancel_.load();
}

void StartWatch::LogStopped(const std::string& checkpoint_dir) const {
  LogInfo(
      "stopped on {} before the trainer started: {} was left as it was and the store holds "
      "every snapshot; exiting {}",
      notice_ ? "the interruption notice" : "a stop signal", checkpoint_dir, kExitInterrupted);
}

Status RetryTransient(Clock& clock, std::string_view what, const std::function<Status()>& step,
                      const std::function<bool()>& stop, Clock::MonoTime give_up_at) {
  milliseconds backoff(1000);
  const Clock::MonoTime first = clock.Monotonic();
  for (int tries = 1;; ++tries) {
    Status st = step();
    if (st.ok() || !st.Is(StatusCode::kUnavailable)) {
      if (st.ok() && tries > 1) {
        LogInfo("{}: the store answers again, after {} tries over {:.1f} s", what, tries,
                std::chrono::duration<double>(clock.Monotonic() - first).count());
      }
      return st;
    }
    const Clock::MonoTime now = clock.Monotonic();
    if (now + backoff > give_up_at) return st;
    LogWarn("{}: {}; trying again in {:.0f} s (try {})", what, st.message(),
            std::chrono::duration<double>(backoff).count(), tries + 1);
    for (const Clock::MonoTime until = now + backoff; clock.Monotonic() < until;) {
      if (stop()) return Status::Cancelled(std::string(what) + ": stopped");
      clock.SleepFor(std::min<std::chrono::nanoseconds>(until - clock.Monotonic(),
                                                        milliseconds(100)));
    }
    backoff = std::min(backoff * 2, milliseconds(30'000));
  }
}

}  // namespace sg
