// The child side of ChildProcess::SpawnDyingWithParent (common/process.h):
// what runs in a forked child of a possibly multi-threaded process, so only
// async-signal-safe calls until execve or _exit.
#include "common/process_child.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>

namespace sg::process_detail {
namespace {

// Closes every descriptor from `from` on except `keep` (-1: none).
void CloseFromExcept(int from, int keep) {
  auto close_range_or_loop = [](unsigned lo, unsigned hi) {
    if (lo > hi) return;
    if (::close_range(lo, hi, 0) == 0) return;
    // Kernels before 5.9 have no close_range: close one by one up to a
    // bound beyond any descriptor the agent opens.
    for (unsigned fd = lo; fd <= hi && fd < 65536; ++fd) ::close(static_cast<int>(fd));
  };
  if (keep < from) {
    close_range_or_loop(static_cast<unsigned>(from), ~0U);
    return;
  }
  if (keep > from)
    close_range_or_loop(static_cast<unsigned>(from), static_cast<unsigned>(keep - 1));
  close_range_or_loop(static_cast<unsigned>(keep + 1), ~0U);
}

// Reports errno `err` through `report_fd` and ends the child.
[[noreturn]] void ChildFail(int report_fd, int err) {
  ssize_t n;
  do {
    n = ::write(report_fd, &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  ::_exit(127);
}

}  // namespace

// The child of a die_with_parent spawn, up to execve.
[[noreturn]] void ExecChild(pid_t parent, int report_fd, int stdin_fd, int stdout_fd, int stderr_fd,
                            const char* exe, char* const* argv, char* const* envp) {
  ::setpgid(0, 0);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ChildFail(report_fd, errno);
  // The parent may have died before prctl took effect: then no signal will
  // ever come, and nobody wants this child.
  if (::getppid() != parent) ::_exit(127);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);  // EINVAL for KILL, STOP
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (::dup2(stdin_fd, 0) < 0) ChildFail(report_fd, errno);
  if (stdout_fd >= 0 && ::dup2(stdout_fd, 1) < 0) ChildFail(report_fd, errno);
  if (stderr_fd >= 0 && ::dup2(stderr_fd, 2) < 0) ChildFail(report_fd, errno);
  // The report pipe is O_CLOEXEC: execve closes it, which tells the parent
  // that the exec worked.
  CloseFromExcept(3, report_fd);
  ::execve(exe, argv, envp);
  ChildFail(report_fd, errno);
}

// The guard of a die_with_parent child: joins the child's group and waits
// for end of file on `pipe_fd`, i.e. for the spawning process to be gone
// (or to close it), then kills the whole group, itself included.
[[noreturn]] void GuardChild(pid_t group, int pipe_fd) {
  ::setpgid(0, group);
  // A copy of the parent without exec: tell it apart in ps and top.
  ::prctl(PR_SET_NAME, "spotguard-guard");
  // Signals meant for the trainer's group (checkpoint_signal, stop_signal)
  // must not end the guard; SIGKILL still does.
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_BLOCK, &all, nullptr);
  // It must hold no copy of anything: not the write end of its own pipe, not
  // the trainer's output pipe (its reader waits for end of file).
  CloseFromExcept(0, pipe_fd);
  if (::getpgrp() != group) ::_exit(1);
  char c;
  while (true) {
    const ssize_t n = ::read(pipe_fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::kill(0, SIGKILL);
  ::_exit(0);
}

}  // namespace sg::process_detail
