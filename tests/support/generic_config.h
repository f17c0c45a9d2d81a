// The config of a test of the start's local checkpoints (RestoreAtStart,
// the suspect set-aside): job "job", whose checkpoints are the files of
// `checkpoint_dir` that match `pattern` (preset generic), settled at once.
#pragma once

#include <string>

#include "agent/config/config.h"

namespace sg::testing {

inline Config GenericCheckpointConfig(const std::string& checkpoint_dir,
                                      const std::string& pattern) {
  Config config;
  config.job = "job";
  config.checkpoint_dir = checkpoint_dir;
  config.preset = Preset::kGeneric;
  config.patterns = {pattern};
  config.settle_time = Duration(100);
  return config;
}

}  // namespace sg::testing
