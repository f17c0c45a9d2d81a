#include "common/orphan_reaper.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include "common/owned_children.h"
#include "common/proc_stat.h"

namespace sg {
namespace owned_children {
namespace {

std::mutex& Mutex() {
  static std::mutex mu;
  return mu;
}
std::set<pid_t>& Owned() {
  static std::set<pid_t> owned;
  return owned;
}

}  // namespace

std::unique_lock<std::mutex> Lock() { return std::unique_lock<std::mutex>(Mutex()); }
void AddLocked(pid_t pid) { Owned().insert(pid); }
bool OwnedLocked(pid_t pid) { return Owned().count(pid) != 0; }
void Remove(pid_t pid) {
  auto lock = Lock();
  Owned().erase(pid);
}

}  // namespace owned_children

namespace {

bool ReapIfEnded(pid_t pid) {
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid, &status, WNOHANG)) < 0 && errno == EINTR) {
  }
  return r == pid;
}

}  // namespace

int ReapOrphanedChildren() {
  auto lock = owned_children::Lock();
  int reaped = 0;
  // waitid(WNOWAIT) names an ended child without reaping it. It always names
  // the same one while that one stays unreaped, so an owned child that has
  // ended and waits for its owner hides the rest: those are found in /proc.
  while (true) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      return reaped;  // ECHILD: no children at all
    }
    if (info.si_pid == 0) return reaped;  // none has ended
    if (owned_children::OwnedLocked(info.si_pid)) break;
    if (!ReapIfEnded(info.si_pid)) return reaped;
    ++reaped;
  }
  const pid_t self = ::getpid();
  for (const ProcStat& p : ListProcesses()) {
    if (p.ppid == self && p.state == 'Z' && !owned_children::OwnedLocked(p.pid) &&
        ReapIfEnded(p.pid)) {
      ++reaped;
    }
  }
  return reaped;
}

}  // namespace sg
