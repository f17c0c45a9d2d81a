// Signal names as users write them in configs: "SIGUSR1", "usr1", "HUP".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sg {

// The signal number for a name (case-insensitive, "SIG" prefix optional).
// Only signals a trainer can sensibly be sent are known.
StatusOr<int> ParseSignalName(std::string_view name);
// "SIGUSR1"; "signal N" for numbers without a name here.
std::string SignalName(int signo);
std::vector<std::string> KnownSignalNames();

}  // namespace sg
