// A Clock that only moves when told to (or when code under test sleeps).
#pragma once

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

}  // namespace sg::testing
