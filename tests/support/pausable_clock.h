// The real clock, except that a test can stop it: while paused, Now() and
// Monotonic() return the instant of Pause(), however long the test (or a
// loaded machine) takes. For checks of the form "not settled yet" against
// code that timestamps with the clock it was given: pause before the event,
// check, resume. SleepFor really sleeps.
#pragma once

#include <mutex>
#include <optional>

#include "common/clock.h"

namespace sg::testing {

class PausableClock final : public Clock {
 public:
  WallTime Now() override {
    std::lock_guard<std::mutex> lock(mu_);
    return paused_ ? paused_->first : SystemClock().Now();
  }
  MonoTime Monotonic() override {
    std::lock_guard<std::mutex> lock(mu_);
    return paused_ ? paused_->second : SystemClock().Monotonic();
  }
  void SleepFor(std::chrono::nanoseconds d) override { SystemClock().SleepFor(d); }

  void Pause() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!paused_) paused_.emplace(SystemClock().Now(), SystemClock().Monotonic());
  }
  // Back to the real time (a jump forward by however long it was paused).
  void Resume() {
    std::lock_guard<std::mutex> lock(mu_);
    paused_.reset();
  }

 private:
  std::mutex mu_;
  std::optional<std::pair<WallTime, MonoTime>> paused_;
};

}  // namespace sg::testing
