#include "agent/run/interruption_history.h"

#include <algorithm>
#include <cctype>

#include "agent/ledger/ledger.h"
#include "agent/repo/repository.h"

namespace sg {

std::optional<Clock::WallTime> ParseCompactStamp(std::string_view stamp) {
  // 20261122T082200.123Z: 20 characters, digits where digits go; read as
  // the ISO 8601 time it compacts (ParseLedgerTime's form).
  constexpr std::string_view kShape = "dddddddd" "T" "dddddd" "." "ddd" "Z";
  if (stamp.size() != kShape.size()) return std::nullopt;
  for (size_t i = 0; i < stamp.size(); ++i) {
    if (kShape[i] == 'd' ? !std::isdigit(static_cast<unsigned char>(stamp[i]))
                         : stamp[i] != kShape[i]) {
      return std::nullopt;
    }
  }
  const std::string iso = std::string(stamp.substr(0, 4)) + "-" + std::string(stamp.substr(4, 2)) +
                          "-" + std::string(stamp.substr(6, 5)) + ":" +
                          std::string(stamp.substr(11, 2)) + ":" + std::string(stamp.substr(13));
  const std::optional<LedgerMs> ms = ParseLedgerTime(iso);
  if (!ms) return std::nullopt;
  return Clock::WallTime(std::chrono::milliseconds(*ms));
}

StatusOr<InterruptionHistory> ReadInterruptionHistory(ObjectStore& store, const std::string& job,
                                                      Clock::WallTime now) {
  SG_ASSIGN_OR_RETURN(std::vector<StoredEvent> listed, Repository::Open(store, job).Events());
  InterruptionHistory h;
  std::optional<Clock::WallTime> first;
  for (const StoredEvent& e : listed) {
    const std::optional<Clock::WallTime> at = ParseCompactStamp(e.stamp);
    if (!at) continue;  // not an event's key
    if (!first || *at < *first) first = at;
    if (e.kind == "notice") ++h.interruptions;
  }
  if (first && now > *first) h.exposure = std::chrono::duration_cast<Seconds>(now - *first);
  return h;
}

}  // namespace sg
