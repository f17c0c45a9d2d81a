// Completion that must be earned (`complete_when`, docs/agent.md): a
// trainer's exit 0 completes the job only when the conditions hold. Pure
// apart from NewestStepWritten (tests/unit/completion_test.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "agent/config/config.h"

namespace sg {

// Why an exit 0 does not complete the job ("exited 0 at step 61200, below
// step_at_least 100000"); nullopt when every condition of `when` holds.
// `step`: the newest step the trainer wrote a checkpoint for;
// `file_present`: whether when.file_exists is in the checkpoint dir.
std::optional<std::string> UnmetCompletion(const CompleteWhen& when, std::optional<int64_t> step,
                                           bool file_present);

// UnmetCompletion for the trainer that just exited 0 with `checkpoint_dir`
// as it left it: its newest step written and whether when.file_exists is
// there. One node's agent and a group node both ask this.
std::optional<std::string> UnearnedExit(const CompleteWhen& when,
                                        const std::string& checkpoint_dir);

// The newest step any file name in `checkpoint_dir` carries, complete or
// not (a trainer that exits right after writing has not settled yet).
std::optional<int64_t> NewestStepWritten(const std::string& checkpoint_dir);

}  // namespace sg
