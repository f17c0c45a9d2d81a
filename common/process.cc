#include "common/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "common/files.h"
#include "common/process_child.h"
#include "common/owned_children.h"
#include "common/proc_stat.h"
#include "common/signal_names.h"
#include "common/strings.h"

namespace sg {
namespace {

// The executable for argv[0]: itself when it contains '/', otherwise the
// first executable match in the child's PATH.
StatusOr<std::string> FindExecutable(const std::string& name,
                                     const std::map<std::string, std::string>& env) {
  if (name.empty()) return Status::InvalidArgument("cannot run an empty command");
  if (name.find('/') != std::string::npos) return name;
  auto it = env.find("PATH");
  const std::string path = it != env.end() ? it->second : "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& dir : Split(path, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return Status::NotFound("\"" + name + "\" is not an executable in PATH (" + path + ")");
}

// A memory file holding `data`, positioned at its start, to become a child's
// stdin: unlike a pipe it never blocks the parent, whatever the size.
StatusOr<UniqueFd> MemoryFileWith(const std::string& data) {
  UniqueFd fd(::memfd_create("spotguard-stdin", MFD_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(errno, "memfd_create for a child's stdin");
  SG_RETURN_IF_ERROR(WriteAll(fd.get(), data, "a child's stdin"));
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) return Status::FromErrno(errno, "lseek memfd");
  return fd;
}

// argv and envp as execve wants them, built before any fork (the child may
// not allocate). The strings live as long as this object.
class ExecVectors {
 public:
  explicit ExecVectors(const SpawnOptions& options) : args_(options.argv) {
    for (const auto& [k, v] : options.env) env_.push_back(k + "=" + v);
    for (std::string& a : args_) c_args_.push_back(a.data());
    c_args_.push_back(nullptr);
    for (std::string& e : env_) c_env_.push_back(e.data());
    c_env_.push_back(nullptr);
  }
  char* const* argv() { return c_args_.data(); }
  char* const* envp() { return c_env_.data(); }

 private:
  std::vector<std::string> args_, env_;
  std::vector<char*> c_args_, c_env_;
};

// Owns the posix_spawn attribute and file-action objects.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

Status SpawnError(int err, const std::string& what) {
  return err == 0 ? Status::Ok() : Status::FromErrno(err, what);
}

void ReapBlocking(pid_t pid) {
  int status;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  owned_children::Remove(pid);
}

// fork() with the child registered as owned before anyone can look
// (common/owned_children.h). Returns in the child too, like fork().
pid_t ForkOwned() {
  auto lock = owned_children::Lock();
  const pid_t pid = ::fork();
  if (pid > 0) owned_children::AddLocked(pid);
  if (pid == 0) (void)lock.release();  // the child's copy: never unlocked there
  return pid;
}

ExitStatus Decode(int wait_status) {
  ExitStatus s;
  if (WIFSIGNALED(wait_status)) {
    s.signal = WTERMSIG(wait_status);
  } else if (WIFEXITED(wait_status)) {
    s.code = WEXITSTATUS(wait_status);
  }
  return s;
}

}  // namespace

std::string ExitStatus::ToString() const {
  if (signal != 0) return "killed by " + SignalName(signal);
  return "exit code " + std::to_string(code);
}

StatusOr<ChildProcess> ChildProcess::Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return Status::InvalidArgument("cannot run an empty command");
  SG_ASSIGN_OR_RETURN(const std::string exe, FindExecutable(options.argv[0], options.env));
  if (options.die_with_parent) return SpawnDyingWithParent(options, exe);

  SpawnSetup setup;
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  SG_RETURN_IF_ERROR(SpawnError(
      posix_spawnattr_setflags(
          &setup.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF),
      "posix_spawnattr_setflags"));
  SG_RETURN_IF_ERROR(SpawnError(posix_spawnattr_setpgroup(&setup.attr, 0), "setpgroup"));
  SG_RETURN_IF_ERROR(SpawnError(posix_spawnattr_setsigmask(&setup.attr, &none), "setsigmask"));
  SG_RETURN_IF_ERROR(SpawnError(posix_spawnattr_setsigdefault(&setup.attr, &all), "setsigdef"));

  UniqueFd stdin_fd;
  if (options.stdin_data) {
    SG_ASSIGN_OR_RETURN(stdin_fd, MemoryFileWith(*options.stdin_data));
    SG_RETURN_IF_ERROR(SpawnError(
        posix_spawn_file_actions_adddup2(&setup.actions, stdin_fd.get(), 0), "adddup2 stdin"));
  } else {
    SG_RETURN_IF_ERROR(
        SpawnError(posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0),
                   "addopen /dev/null"));
  }
  if (options.stdout_fd >= 0) {
    SG_RETURN_IF_ERROR(SpawnError(
        posix_spawn_file_actions_adddup2(&setup.actions, options.stdout_fd, 1), "adddup2 stdout"));
  }
  if (options.stderr_fd >= 0) {
    SG_RETURN_IF_ERROR(SpawnError(
        posix_spawn_file_actions_adddup2(&setup.actions, options.stderr_fd, 2), "adddup2 stderr"));
  }
  // Descriptors opened without O_CLOEXEC (by a library, say) stay behind too.
  SG_RETURN_IF_ERROR(
      SpawnError(posix_spawn_file_actions_addclosefrom_np(&setup.actions, 3), "addclosefrom"));

  ExecVectors exec(options);

  pid_t pid = -1;
  auto lock = owned_children::Lock();
  const int err =
      posix_spawn(&pid, exe.c_str(), &setup.actions, &setup.attr, exec.argv(), exec.envp());
  if (err != 0) return Status::FromErrno(err, "start " + exe);
  owned_children::AddLocked(pid);
  return ChildProcess(pid);
}

StatusOr<ChildProcess> ChildProcess::SpawnDyingWithParent(const SpawnOptions& options,
                                                          const std::string& exe) {
  // Everything the child needs is prepared here: after fork it may only
  // make async-signal-safe calls (no allocation, no locks).
  UniqueFd stdin_fd;
  if (options.stdin_data) {
    SG_ASSIGN_OR_RETURN(stdin_fd, MemoryFileWith(*options.stdin_data));
  } else {
    SG_ASSIGN_OR_RETURN(stdin_fd, OpenFile("/dev/null", O_RDONLY));
  }
  ExecVectors exec(options);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  UniqueFd report_read(report[0]), report_write(report[1]);
  const pid_t parent = ::getpid();

  const pid_t pid = ForkOwned();
  if (pid < 0) return Status::FromErrno(errno, "fork to start " + exe);
  if (pid == 0) {
    process_detail::ExecChild(parent, report_write.get(), stdin_fd.get(), options.stdout_fd, options.stderr_fd,
              exe.c_str(), exec.argv(), exec.envp());
  }
  // Also here, so that no signal to the group can precede the child's own setpgid.
  ::setpgid(pid, pid);
  ChildProcess child(pid);
  child.group_ = pid;
  report_write.reset();
  int err = 0;
  ssize_t n;
  do {
    n = ::read(report_read.get(), &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof err)) {
    ReapBlocking(pid);
    child.pid_ = -1;
    return Status::FromErrno(err, "start " + exe);
  }

  int guard[2];
  if (::pipe2(guard, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  UniqueFd guard_read(guard[0]), guard_write(guard[1]);
  const pid_t guard_pid = ForkOwned();
  if (guard_pid < 0) return Status::FromErrno(errno, "fork the guard of " + exe);
  if (guard_pid == 0) process_detail::GuardChild(pid, guard_read.get());
  guard_read.reset();
  child.guard_pid_ = guard_pid;
  child.guard_fd_ = guard_write.release();
  // The child is unreaped, so its group still exists even if it has exited.
  if (::setpgid(guard_pid, pid) != 0) {
    return Status::FromErrno(errno, "put the guard of " + exe + " into its process group");
  }
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_),
      guard_pid_(other.guard_pid_),
      group_(other.group_),
      guard_fd_(other.guard_fd_),
      exit_(other.exit_) {
  other.pid_ = other.guard_pid_ = other.group_ = other.guard_fd_ = -1;
  other.exit_.reset();
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    KillAndReap();
    pid_ = other.pid_;
    guard_pid_ = other.guard_pid_;
    group_ = other.group_;
    guard_fd_ = other.guard_fd_;
    exit_ = other.exit_;
    other.pid_ = other.guard_pid_ = other.group_ = other.guard_fd_ = -1;
    other.exit_.reset();
  }
  return *this;
}

ChildProcess::~ChildProcess() { KillAndReap(); }

void ChildProcess::KillAndReap() {
  if (pid_ > 0) {
    ::kill(-group_, SIGKILL);
    Reap();
  }
  EndGuard();
}

void ChildProcess::Reap() {
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  exit_ = r == pid_ ? Decode(status) : ExitStatus{.code = -1};
  owned_children::Remove(pid_);
  pid_ = -1;
}

void ChildProcess::EndGuard() {
  if (guard_fd_ >= 0) {
    ::close(guard_fd_);
    guard_fd_ = -1;
  }
  if (guard_pid_ <= 0) return;
  // The unreaped guard keeps the group alive, so this reaches only the
  // child's own leftovers (and the guard), never a reused group id.
  ::kill(-group_, SIGKILL);
  ::kill(guard_pid_, SIGKILL);  // in case it never joined the group
  ReapBlocking(guard_pid_);
  guard_pid_ = -1;
}

StatusOr<std::optional<ExitStatus>> ChildProcess::Wait(
    std::optional<std::chrono::milliseconds> timeout) {
  if (pid_ <= 0) return Status::NotFound("the process was already waited for");
  const auto deadline = timeout ? std::chrono::steady_clock::now() + *timeout
                                : std::chrono::steady_clock::time_point::max();
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, timeout ? WNOHANG : 0);
    if (r == pid_) {
      owned_children::Remove(pid_);
      pid_ = -1;
      exit_ = Decode(status);
      // die_with_parent: the guard stays, anchoring what is left of the
      // group until EndGroup, Stop or the destructor.
      return exit_;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "waitpid " + std::to_string(pid_));
    }
    // r == 0: still running (only with WNOHANG).
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return std::optional<ExitStatus>();
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

Status ChildProcess::SignalGroup(int signo) {
  if (!anchored()) return Status::NotFound("the process was already waited for");
  if (::kill(-group_, signo) != 0 && errno != ESRCH) {
    return Status::FromErrno(errno, "kill process group " + std::to_string(group_));
  }
  return Status::Ok();
}

std::vector<pid_t> ChildProcess::GroupMembers() const {
  std::vector<pid_t> out;
  if (!anchored()) return out;
  for (const ProcStat& p : ListProcesses()) {
    if (p.pgrp == group_ && p.state != 'Z' && p.pid != guard_pid_) out.push_back(p.pid);
  }
  return out;
}

StatusOr<ExitStatus> ChildProcess::EndGroup(std::chrono::steady_clock::time_point deadline,
                                            bool* killed) {
  using std::chrono::milliseconds;
  using std::chrono::steady_clock;
  if (killed != nullptr) *killed = false;
  if (!anchored()) {
    if (exit_) return *exit_;
    return Status::NotFound("the process was already waited for");
  }
  // Polls /proc: the child shows as a zombie once it ended, and it is reaped
  // only at the end, so the group id stays ours meanwhile.
  auto ended_by = [this](steady_clock::time_point until) {
    auto pause = milliseconds(1);
    while (true) {
      if (GroupMembers().empty()) return true;
      const auto now = steady_clock::now();
      if (now >= until) return false;
      std::this_thread::sleep_for(std::min<steady_clock::duration>(pause, until - now));
      pause = std::min(pause * 2, milliseconds(20));
    }
  };
  if (!ended_by(deadline)) {
    if (killed != nullptr) *killed = true;
    ::kill(-group_, SIGKILL);
    // SIGKILL is not ignorable; only a process stuck in the kernel (state D)
    // takes longer than this, and then the reap below waits for it.
    (void)ended_by(steady_clock::now() + milliseconds(1000));
  }
  if (pid_ > 0) Reap();
  EndGuard();
  return *exit_;
}

StatusOr<ExitStatus> ChildProcess::Stop(std::chrono::milliseconds grace, int signo) {
  SG_RETURN_IF_ERROR(SignalGroup(signo));
  return EndGroup(std::chrono::steady_clock::now() + grace);
}

}  // namespace sg
