// Human durations as used in configs: "90s", "5m", "1h30m", "500ms", "2d".
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/status.h"

namespace sg {

using Duration = std::chrono::milliseconds;

// Accepts one or more <number><unit> parts (units ms, s, m, h, d; the number
// may have a fraction, "1.5h"), or a bare "0". Rejects negatives, a missing
// unit and anything that overflows, naming what was wrong.
StatusOr<Duration> ParseDuration(std::string_view text);

// The shortest form that ParseDuration reads back to the same value: "1h30m", "250ms", "0s".
std::string FormatDuration(Duration d);

}  // namespace sg
