#include "common/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "common/files.h"
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

  std::vector<std::string> args = options.argv;
  std::vector<char*> c_args;
  for (std::string& a : args) c_args.push_back(a.data());
  c_args.push_back(nullptr);
  std::vector<std::string> env_entries;
  for (const auto& [k, v] : options.env) env_entries.push_back(k + "=" + v);
  std::vector<char*> c_env;
  for (std::string& e : env_entries) c_env.push_back(e.data());
  c_env.push_back(nullptr);

  pid_t pid = -1;
  const int err =
      posix_spawn(&pid, exe.c_str(), &setup.actions, &setup.attr, c_args.data(), c_env.data());
  if (err != 0) return Status::FromErrno(err, "start " + exe);
  return ChildProcess(pid);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept : pid_(other.pid_) { other.pid_ = -1; }

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    KillAndReap();
    pid_ = other.pid_;
    other.pid_ = -1;
  }
  return *this;
}

ChildProcess::~ChildProcess() { KillAndReap(); }

void ChildProcess::KillAndReap() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  int status;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
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
      pid_ = -1;
      return std::optional<ExitStatus>(Decode(status));
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
  if (pid_ <= 0) return Status::NotFound("the process was already waited for");
  if (::kill(-pid_, signo) != 0 && errno != ESRCH) {
    return Status::FromErrno(errno, "kill process group " + std::to_string(pid_));
  }
  return Status::Ok();
}

StatusOr<ExitStatus> ChildProcess::Stop(std::chrono::milliseconds grace) {
  SG_RETURN_IF_ERROR(SignalGroup(SIGTERM));
  SG_ASSIGN_OR_RETURN(std::optional<ExitStatus> ended, Wait(grace));
  if (ended) return *ended;
  SG_RETURN_IF_ERROR(SignalGroup(SIGKILL));
  SG_ASSIGN_OR_RETURN(ended, Wait());
  return *ended;
}

}  // namespace sg
