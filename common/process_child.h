// The child side of a die_with_parent spawn (common/process.h). Internal to
// common/process*.cc. Both run in a forked child: only async-signal-safe
// calls until execve or _exit.
#pragma once

#include <sys/types.h>

namespace sg::process_detail {

// The trainer's side, up to execve: its own process group, SIGKILL when the
// spawning thread's process dies, default signal dispositions, the given
// descriptors as 0-2 and every other one closed. A failure is reported as
// errno through `report_fd` (close on exec), and the child exits 127.
[[noreturn]] void ExecChild(pid_t parent, int report_fd, int stdin_fd, int stdout_fd, int stderr_fd,
                            const char* exe, char* const* argv, char* const* envp);

// The guard of a die_with_parent child: joins the child's group and waits
// for end of file on `pipe_fd`, i.e. for the spawning process to be gone
// (or to close it), then kills the whole group, itself included.
[[noreturn]] void GuardChild(pid_t group, int pipe_fd);

}  // namespace sg::process_detail
