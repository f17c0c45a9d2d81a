// Time, as a seam: code takes a Clock& so tests can fast-forward a two-minute
// notice or a five-minute backoff without sleeping.
#pragma once

#include <chrono>
#include <ctime>
#include <optional>
#include <string>

namespace sg {

class Clock {
 public:
  using WallTime = std::chrono::system_clock::time_point;
  using MonoTime = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  // Wall-clock time, for timestamps that leave the process (events, manifests).
  virtual WallTime Now() = 0;
  // Monotonic time, for deadlines and intervals.
  virtual MonoTime Monotonic() = 0;
  virtual void SleepFor(std::chrono::nanoseconds d) = 0;
};

class RealClock final : public Clock {
 public:
  WallTime Now() override;
  MonoTime Monotonic() override;
  void SleepFor(std::chrono::nanoseconds d) override;
};

// The process-wide real clock.
Clock& SystemClock();

// A broken-down UTC time (strptime's) as a WallTime; nullopt outside the
// years 1970..2200, which a WallTime (nanoseconds in 64 bits) can hold with
// room to spare. Times that servers send pass through here, so that a
// hostile year never overflows the conversion.
std::optional<Clock::WallTime> WallTimeFromUtc(std::tm tm);

// "2026-11-22T08:22:00Z" (seconds) or with milliseconds when `millis`.
std::string FormatUtc(Clock::WallTime t, bool millis = false);

}  // namespace sg
