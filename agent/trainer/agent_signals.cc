#include "agent/trainer/agent_signals.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "common/log.h"
#include "common/signal_names.h"

namespace sg {
namespace {

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGQUIT};
constexpr int kForwardedSignals[] = {SIGUSR1, SIGUSR2, SIGHUP};
// Signals whose default action ends the process and that nobody sends on
// purpose to an agent: taken, logged and dropped.
constexpr int kDroppedSignals[] = {SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ,
                                   SIGIO,   SIGPWR,    SIGSTKFLT};

bool IsStopSignal(int signo) {
  for (int s : kStopSignals) {
    if (s == signo) return true;
  }
  return false;
}

}  // namespace

bool IsForwardedSignal(int signo) {
  for (int s : kForwardedSignals) {
    if (s == signo) return true;
  }
  return false;
}

StatusOr<UniqueFd> BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kStopSignals) sigaddset(&set, s);
  for (int s : kForwardedSignals) sigaddset(&set, s);
  for (int s : kDroppedSignals) sigaddset(&set, s);
  for (int s = SIGRTMIN; s <= SIGRTMAX; ++s) sigaddset(&set, s);
  // Blocked before any thread starts, so every thread inherits the mask and
  // the signals only arrive through the signalfd.
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return Status::IOError("sigprocmask");
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  if (::sigaction(SIGPIPE, &ignore, nullptr) != 0) return Status::FromErrno(errno, "sigaction");
  int fd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) return Status::FromErrno(errno, "signalfd");
  return UniqueFd(fd);
}

ArrivedSignals ReadArrivedSignals(int signal_fd) {
  ArrivedSignals arrived;
  signalfd_siginfo info{};
  while (::read(signal_fd, &info, sizeof info) == sizeof info) {
    const int signo = static_cast<int>(info.ssi_signo);
    const std::string from = Format(" from pid {}", info.ssi_pid);
    if (IsStopSignal(signo)) {
      LogInfo("received {}{}", SignalName(signo), from);
      arrived.stop = true;
    } else if (IsForwardedSignal(signo)) {
      arrived.forward.push_back(signo);
    } else {
      LogWarn("received {}{}; ignored", SignalName(signo), from);
    }
  }
  return arrived;
}

}  // namespace sg
