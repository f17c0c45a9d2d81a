// The signals an agent takes (docs/agent.md, "Signals"). Every signal that
// would end the process by default is caught, so that no stray signal (a
// `pkill -USR1 -f train.py` that matches the agent's command line too, a
// closed pipe on stderr) kills the agent and, through its guard, the
// trainer without a snapshot:
//   - SIGTERM, SIGINT and SIGQUIT stop the job (a last snapshot, exit 75);
//   - SIGUSR1, SIGUSR2 and SIGHUP are forwarded to the trainer, as a
//     container's init process forwards them;
//   - SIGPIPE is ignored: a write to a closed stderr fails with EPIPE and
//     the line is dropped;
//   - the others (SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGIO,
//     SIGPWR, SIGSTKFLT and the real-time signals) are logged and dropped.
// The signals of faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP,
// SIGSYS) and the job-control stops keep their default actions.
#pragma once

#include <vector>

#include "common/files.h"
#include "common/status.h"

namespace sg {

// Blocks the signals above in the calling thread (call before any thread
// starts: every thread inherits the mask), ignores SIGPIPE, and returns a
// signalfd that delivers them. A trainer started afterwards gets every
// signal back at its default and unblocked (common/process.h).
StatusOr<UniqueFd> BlockStopSignals();

// What arrived on the signalfd since the last read, each logged.
struct ArrivedSignals {
  bool stop = false;         // SIGTERM, SIGINT or SIGQUIT
  std::vector<int> forward;  // SIGUSR1, SIGUSR2, SIGHUP, in order of arrival
};
ArrivedSignals ReadArrivedSignals(int signal_fd);

// Whether `signo` is one the agent forwards to the trainer.
bool IsForwardedSignal(int signo);

}  // namespace sg
