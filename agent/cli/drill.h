// `spotguard drill`: a rehearsal of an interruption on one machine. The agent
// runs the job exactly as on EC2, except that its metadata service is a
// stand-in that announces a spot interruption `after` into the run; then a
// "replacement instance" (a second agent with a fresh checkpoint dir)
// restores and resumes, and is interrupted the same way. The report says
// what survived.
#pragma once

#include <map>
#include <string>

#include "agent/config/config.h"
#include "common/duration.h"

namespace sg {

struct DrillOptions {
  Duration after{20'000};
  bool use_configured_store = false;  // else a private file:// store
};

int RunDrillCommand(const Config& config, const std::map<std::string, std::string>& env,
                    const DrillOptions& options);

}  // namespace sg
