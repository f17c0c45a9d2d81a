// Where `checkpoint_signal` goes (docs/multi-node.md, "Where checkpoint_signal
// goes"), for one node and for a group alike: to the trainer's process
// group, so a trainer started through a shell or with helper processes gets
// it; but when the trainer is a known launcher, to its workers only, since
// an unhandled signal kills the launcher (torchrun dies of SIGUSR1) and the
// workers with it.
#pragma once

#include <string>
#include <vector>

#include "agent/trainer/job_ports.h"
#include "common/status.h"

namespace sg {

enum class SignalTarget {
  kTrainer,  // the trainer's whole process group
  kWorkers,  // every process of its group but the launcher
};

// kWorkers when `command` runs a launcher: its program is `torchrun`, or a
// python run with `-m torch.distributed.run` or `-m torch.distributed.launch`;
// else kTrainer.
SignalTarget CheckpointSignalTarget(const std::vector<std::string>& command);

// Sends `signo` where `target` says; NotFound when the trainer has ended.
Status SendCheckpointSignal(Trainer& trainer, int signo, SignalTarget target);

}  // namespace sg
