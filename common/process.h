// Child processes, started from an argv vector (never through a shell unless
// the caller puts one in argv), each in its own process group so that one
// signal reaches everything it started.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace sg {

struct SpawnOptions {
  // argv[0] is a path, or a name looked up in the PATH of `env` (or
  // /usr/local/bin:/usr/bin:/bin when `env` has none).
  std::vector<std::string> argv;
  // The child's whole environment; nothing is inherited implicitly.
  std::map<std::string, std::string> env;
  // Given: the child reads exactly these bytes on stdin, then end of file.
  // Absent: stdin is /dev/null.
  std::optional<std::string> stdin_data;
  // -1: inherited; otherwise the child's stdout (stderr) is a copy of this
  // descriptor (pass 2 to send the child's stdout to our stderr).
  int stdout_fd = -1;
  int stderr_fd = -1;
  // The child and every process left in its group die with the process
  // that spawned it, however that ends (kill -9 included), so nothing keeps
  // running unsupervised. Two mechanisms (docs/agent.md, "One agent per
  // checkpoint directory, and no orphans"):
  //  - the child gets PR_SET_PDEATHSIG SIGKILL. The kernel sends it when the
  //    THREAD that spawned it exits, not the process: REQUIRES that the
  //    calling thread lives as long as the child should (the agent spawns its
  //    trainer from its main thread);
  //  - a guard process, forked without exec into the child's group, blocks
  //    on a pipe whose write end only the spawning process holds; at end of
  //    file (that process is gone) it SIGKILLs the group, which reaches
  //    descendants that kept the group (torchrun workers, say) too.
  // Descendants that leave the group (setsid, setpgid) are not covered.
  // Uses fork + execve (posix_spawn has no hook for prctl); an exec failure
  // is still reported by Spawn as an error.
  bool die_with_parent = false;
};

struct ExitStatus {
  int code = 0;    // the exit code when the child exited
  int signal = 0;  // the signal that killed it, 0 when it exited
  bool success() const { return signal == 0 && code == 0; }
  // The shell's convention: the exit code, or 128 + signal.
  int ShellCode() const { return signal != 0 ? 128 + signal : code; }
  std::string ToString() const;  // "exit code 3", "killed by SIGTERM"
};

// A running (or ended, not yet waited for) child process. The child gets
// default signal dispositions, an empty signal mask and no descriptors but 0,
// 1 and 2. Destroying a ChildProcess that is still running kills its whole
// group (SIGKILL) and reaps it, so no child outlives its owner by accident.
class ChildProcess {
 public:
  static StatusOr<ChildProcess> Spawn(const SpawnOptions& options);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // Waits for the child to end: forever when `timeout` is nullopt, not at all
  // when it is zero. Returns nullopt while it is still running. After the
  // exit status has been returned once, running() is false.
  StatusOr<std::optional<ExitStatus>> Wait(
      std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  // Sends `signo` to the child's process group. NotFound once it was waited for.
  Status SignalGroup(int signo);

  // SIGTERM to the group, then SIGKILL when it has not ended within `grace`;
  // returns how it ended.
  StatusOr<ExitStatus> Stop(std::chrono::milliseconds grace);

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  static StatusOr<ChildProcess> SpawnDyingWithParent(const SpawnOptions& options,
                                                     const std::string& exe);
  void KillAndReap();
  // After the child was reaped: kills what is left of its group and reaps
  // the guard (die_with_parent only).
  void EndGuard();

  pid_t pid_ = -1;
  pid_t guard_pid_ = -1;  // die_with_parent: the guard process, a member of the group
  pid_t group_ = -1;      // die_with_parent: the child's process group
  int guard_fd_ = -1;     // die_with_parent: write end of the guard's pipe
};

}  // namespace sg
