#include "agent/interruption_history.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "agent/store_layout.h"

namespace sg {

std::optional<Clock::WallTime> ParseCompactStamp(std::string_view stamp) {
  // 20261122T082200.123Z: 20 characters.
  if (stamp.size() != 20 || stamp[8] != 'T' || stamp[15] != '.' || stamp[19] != 'Z') {
    return std::nullopt;
  }
  const std::string text(stamp);
  std::tm tm{};
  int millis = 0;
  char end = 0;
  if (std::sscanf(text.c_str(), "%4d%2d%2dT%2d%2d%2d.%3d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &millis, &end) != 8 ||
      end != 'Z') {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const std::optional<Clock::WallTime> t = WallTimeFromUtc(tm);
  if (!t) return std::nullopt;
  return *t + std::chrono::milliseconds(millis);
}

StatusOr<InterruptionHistory> ReadInterruptionHistory(ObjectStore& store, const std::string& job,
                                                      Clock::WallTime now) {
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListAll(store, EventsPrefix(job)));
  InterruptionHistory h;
  std::optional<Clock::WallTime> first;
  for (const ObjectInfo& o : listed) {
    const std::string_view name = std::string_view(o.key).substr(EventsPrefix(job).size());
    const std::optional<Clock::WallTime> at = ParseCompactStamp(name.substr(0, name.find('-')));
    if (!at) continue;  // not an event's key
    if (!first || *at < *first) first = at;
    if (EventKindOfKey(o.key) == "notice") ++h.interruptions;
  }
  if (first && now > *first) h.exposure = std::chrono::duration_cast<Seconds>(now - *first);
  return h;
}

}  // namespace sg
