// A Clock that only moves when told to (or when code under test sleeps).
#pragma once

#include "common/clock.h"

namespace sg::testing {

class FakeClock final : public Clock {
 public:
  WallTime Now() override { return wall_; }
  MonoTime Monotonic() override { return mono_; }
  void SleepFor(std::chrono::nanoseconds d) override { Advance(d); }

  void Advance(std::chrono::nanoseconds d) {
    wall_ += std::chrono::duration_cast<WallTime::duration>(d);
    mono_ += std::chrono::duration_cast<MonoTime::duration>(d);
  }

 private:
  WallTime wall_ = WallTime(std::chrono::seconds(1'795'000'000));
  MonoTime mono_ = MonoTime(std::chrono::seconds(1000));
};

}  // namespace sg::testing
