// The job's interruption history, from the keys of its events alone (one
// LIST, no body read): the time from its first event to now, and its
// `notice` events. It feeds the checkpoint cadence's MTBF
// (agent/run/checkpoint_cadence.h; docs/agent.md, "Checkpoint cadence").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "agent/run/checkpoint_cadence.h"
#include "common/clock.h"
#include "common/object_store.h"

namespace sg {

StatusOr<InterruptionHistory> ReadInterruptionHistory(ObjectStore& store, const std::string& job,
                                                      Clock::WallTime now);

// "20261122T082200.123Z" (an event key's stamp, CompactStamp's form) as a
// time; nullopt when it is not of that form.
std::optional<Clock::WallTime> ParseCompactStamp(std::string_view stamp);

}  // namespace sg
