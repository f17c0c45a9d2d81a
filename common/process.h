// Child processes, started from an argv vector (never through a shell unless
// the caller puts one in argv), each in its own process group so that one
// signal reaches everything it started.
#pragma once

#include <signal.h>
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
//
// The group is signalled only while its id is provably still ours: while the
// child is unreaped (a zombie too holds the id), or, with die_with_parent,
// while the guard (a member of the group that only this object reaps) is.
// With die_with_parent, reaping the child leaves the rest of its group alone,
// anchored by the guard, until EndGroup, Stop or the destructor: whatever
// the child left behind can still be stopped gracefully (docs/design.md §11).
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

  // Sends `signo` to the child's process group. NotFound once the group id
  // may no longer be ours (the child waited for, and no guard).
  Status SignalGroup(int signo);

  // The live members of the child's group (not zombies, not the guard): the
  // child itself while it runs, and what it left behind. Empty once the group
  // id may no longer be ours.
  std::vector<pid_t> GroupMembers() const;

  // Waits until the child and every member of its group have ended, or until
  // `deadline`; then SIGKILLs what is left of the group and waits for it
  // (the child is reaped, the guard ended). `*killed` (when given) says
  // whether SIGKILL was needed. Returns how the child ended. Never blocks
  // past `deadline` by more than the time SIGKILLed processes take to die.
  StatusOr<ExitStatus> EndGroup(std::chrono::steady_clock::time_point deadline,
                                bool* killed = nullptr);

  // `signo` to the group, then SIGKILL to it when the child or any other
  // member has not ended within `grace` (EndGroup); returns how the child
  // ended. Also reaches the leftovers of a child already waited for
  // (die_with_parent).
  StatusOr<ExitStatus> Stop(std::chrono::milliseconds grace, int signo = SIGTERM);

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid), group_(pid) {}
  static StatusOr<ChildProcess> SpawnDyingWithParent(const SpawnOptions& options,
                                                     const std::string& exe);
  void KillAndReap();
  // Reaps the child (blocking) and records how it ended.
  void Reap();
  // After the child was reaped: kills what is left of its group and reaps
  // the guard (die_with_parent only).
  void EndGuard();

  // Whether the group id is still provably ours (see above).
  bool anchored() const { return pid_ > 0 || guard_pid_ > 0; }

  pid_t pid_ = -1;
  pid_t guard_pid_ = -1;            // die_with_parent: the guard process, a member of the group
  pid_t group_ = -1;                // the child's process group (its pid)
  int guard_fd_ = -1;               // die_with_parent: write end of the guard's pipe
  std::optional<ExitStatus> exit_;  // how the child ended, once reaped
};

}  // namespace sg
