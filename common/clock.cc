#include "common/clock.h"

#include <ctime>
#include <thread>

namespace sg {

Clock::WallTime RealClock::Now() { return std::chrono::system_clock::now(); }
Clock::MonoTime RealClock::Monotonic() { return std::chrono::steady_clock::now(); }
void RealClock::SleepFor(std::chrono::nanoseconds d) { std::this_thread::sleep_for(d); }

Clock& SystemClock() {
  static RealClock clock;
  return clock;
}

std::string FormatUtc(Clock::WallTime t, bool millis) {
  const auto since_epoch = t.time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const std::time_t tt = secs.count();
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[40];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf, n);
  if (millis) {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - secs).count();
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03d", static_cast<int>(ms));
    out += frac;
  }
  out += 'Z';
  return out;
}

std::optional<Clock::WallTime> WallTimeFromUtc(std::tm tm) {
  const long long year = static_cast<long long>(tm.tm_year) + 1900;
  if (year < 1970 || year > 2200) return std::nullopt;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

}  // namespace sg
