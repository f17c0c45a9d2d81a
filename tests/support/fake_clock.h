// A Clock that only moves when told to (or when code under test sleeps).
#pragma once

#include <vector>

#include "common/clock.h"

namespace sg::testing {

class FakeClock final : public Clock {
 public:
  WallTime Now() override { return wall_; }
  MonoTime Monotonic() override { return mono_; }
  void SleepFor(std::chrono::nanoseconds d) override { Advance(d); }

  // Sets the wall clock (e.g. to the real time, when files' mtimes matter).
  void SetNow(WallTime t) { wall_ = t; }

  void Advance(std::chrono::nanoseconds d) {
    wall_ += std::chrono::duration_cast<WallTime::duration>(d);
    mono_ += std::chrono::duration_cast<MonoTime::duration>(d);
  }

 private:
  WallTime wall_ = WallTime(std::chrono::seconds(1'795'000'000));
  MonoTime mono_ = MonoTime(std::chrono::seconds(1000));
};

// A FakeClock that also remembers every SleepFor, so tests can check each
// backoff wait.
class RecordingClock final : public Clock {
 public:
  WallTime Now() override { return fake.Now(); }
  MonoTime Monotonic() override { return fake.Monotonic(); }
  void SleepFor(std::chrono::nanoseconds d) override {
    sleeps.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(d));
    fake.SleepFor(d);
  }
  FakeClock fake;
  std::vector<std::chrono::milliseconds> sleeps;
};

}  // namespace sg::testing
