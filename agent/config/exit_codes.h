// Process exit codes (docs/design.md §2). Scripts and systemd rely on these numbers.
#pragma once

namespace sg {

enum ExitCode : int {
  kExitOk = 0,                // job complete, or the command succeeded
  kExitFailure = 1,           // runtime failure
  kExitUsage = 2,             // usage or config error
  kExitNothingToRestore = 3,  // the store has no snapshot of the job
  kExitFenced = 4,            // another instance holds the job, or another agent on this
                              // host holds the checkpoint dir (agent/trainer/host_lock.h)
  kExitNotCommitted = 74,     // interrupted, and a newer checkpoint than the store's could
                              // not be committed in time: the previous snapshot is the
                              // resume point
  kExitInterrupted = 75,      // interrupted after the final snapshot was committed
};

}  // namespace sg
