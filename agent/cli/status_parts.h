// The pieces `status`'s JSON and text forms share (agent/cli/status_command.h):
// ages, a lease's staleness, an event's fields, and the engine's identity.
// Internal to agent/status_*.cc.
#pragma once

#include <chrono>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/cli/status_command.h"
#include "common/clock.h"
#include "common/duration.h"

namespace sg::status_detail {

// How long ago `utc` (ISO 8601) was; nullopt when it is empty or unreadable.
std::optional<std::chrono::seconds> AgeOf(const std::string& utc, Clock::WallTime now);
// "5 min ago", or "age unknown".
std::string AgoText(const std::optional<std::chrono::seconds>& age);
// A held lease whose heartbeat is older than `timeout`.
bool LeaseIsStale(const LeaseState& lease, Clock::WallTime now, Duration timeout);
// The details of an event beyond kind, time and instance, as "k=v" pairs.
std::string EventDetails(const nlohmann::json& e);
// An event's field as text; "-" when it has none.
std::string Field(const nlohmann::json& e, const char* name);

// The engine's index and attempt of the newest run that recorded them: the
// newest event that carries them, else the newest snapshot.
struct EngineSeen {
  std::optional<int64_t> index, attempt;
};
EngineSeen EngineOf(const JobStatus& s);

}  // namespace sg::status_detail
