#include "agent/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "agent/placeholders.h"
#include "agent/trainer_record.h"
#include "common/files.h"
#include "common/log.h"

namespace sg {
namespace {

std::string Expand(const std::string& arg, const Config& config, const TrainerLaunch& launch) {
  return ExpandPlaceholders(arg, [&](std::string_view name) -> std::optional<std::string> {
    if (name == "resume") return launch.resume;
    if (name == "checkpoint_dir") return config.checkpoint_dir;
    if (name == "job") return config.job;
    if (name == "attempt") return std::to_string(launch.attempt);
    return std::nullopt;  // refused by the config check; kept as written
  });
}

// Copies the trainer's output into the agent's log, one line per entry.
void Forward(int fd, pid_t pid) {
  std::string pending;
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      LogInfo("[trainer {}] {}", pid, pending.substr(0, nl));
      pending.erase(0, nl + 1);
    }
  }
  if (!pending.empty()) LogInfo("[trainer {}] {}", pid, pending);
  ::close(fd);
}

}  // namespace

std::vector<std::string> TrainerArgv(const Config& config, const TrainerLaunch& launch) {
  std::vector<std::string> argv;
  for (const std::string& a : config.command) argv.push_back(Expand(a, config, launch));
  if (!launch.resume.empty()) {
    for (const std::string& a : config.resume_args) argv.push_back(Expand(a, config, launch));
  }
  return argv;
}

std::map<std::string, std::string> TrainerEnvironment(const std::map<std::string, std::string>& env,
                                                      const Config& config,
                                                      const TrainerLaunch& launch,
                                                      const std::string& notice_file) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : env) {
    if (k == "NOTIFY_SOCKET" || k.starts_with("WATCHDOG_")) continue;
    out[k] = v;
  }
  out["SPOTGUARD_RESUME_FROM"] = launch.resume;
  out["SPOTGUARD_CHECKPOINT_DIR"] = config.checkpoint_dir;
  out["SPOTGUARD_JOB"] = config.job;
  out["SPOTGUARD_ATTEMPT"] = std::to_string(launch.attempt);
  out["SPOTGUARD_NOTICE_FILE"] = notice_file;
  return out;
}

TrainerProcess::TrainerProcess(ChildProcess child, int output_fd, std::string record_path)
    : child_(std::move(child)), record_path_(std::move(record_path)) {
  forwarder_ = std::thread(Forward, output_fd, child_.pid());
}

TrainerProcess::~TrainerProcess() {
  if (child_.running()) (void)Stop(SIGKILL, std::chrono::milliseconds(0));
  if (forwarder_.joinable()) forwarder_.join();
}

void TrainerProcess::Ended(const ExitStatus& status) {
  exit_ = status;
  // Reaped, and its group's leftovers killed with it (die_with_parent):
  // nothing of it remains for the next agent to stop.
  if (!record_path_.empty()) RemoveTrainerRecord(record_path_);
}

StatusOr<std::unique_ptr<TrainerProcess>> TrainerProcess::Start(
    const Config& config, const std::map<std::string, std::string>& env,
    const TrainerLaunch& launch, const std::string& notice_file, const std::string& record_path) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  UniqueFd read_end(pipefd[0]), write_end(pipefd[1]);
  SpawnOptions spawn;
  spawn.argv = TrainerArgv(config, launch);
  spawn.env = TrainerEnvironment(env, config, launch, notice_file);
  spawn.stdout_fd = write_end.get();
  spawn.stderr_fd = write_end.get();
  spawn.die_with_parent = true;
  SG_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(spawn));
  write_end.reset();  // the child holds the only write end now
  if (!record_path.empty()) {
    // The trainer leads its own group (pgid == pid). Recorded before the
    // start is logged, so whoever reads the log finds the record.
    auto record = RecordOf(child.pid(), child.pid());
    Status st = record.ok() ? WriteTrainerRecord(record_path, *record) : record.status();
    if (!st.ok()) LogWarn("recording the trainer in {} failed: {}", record_path, st.message());
  }
  LogInfo("started the trainer (pid {}, attempt {}){}", child.pid(), launch.attempt,
          launch.resume.empty() ? "" : ", resuming from " + launch.resume);
  return std::unique_ptr<TrainerProcess>(
      new TrainerProcess(std::move(child), read_end.release(), record_path));
}

std::optional<ExitStatus> TrainerProcess::Poll() {
  if (exit_) return exit_;
  auto r = child_.Wait(std::chrono::milliseconds(0));
  if (r.ok() && r->has_value()) Ended(**r);
  return exit_;
}

Status TrainerProcess::Signal(int signo) {
  if (exit_ || !child_.running()) return Status::NotFound("the trainer is not running");
  return child_.SignalGroup(signo);
}

StatusOr<ExitStatus> TrainerProcess::Stop(int signo, std::chrono::milliseconds grace) {
  if (exit_) return *exit_;
  if (!child_.running()) return Status::NotFound("the trainer is not running");
  (void)child_.SignalGroup(signo);
  SG_ASSIGN_OR_RETURN(std::optional<ExitStatus> ended, child_.Wait(grace));
  if (!ended) {
    LogWarn("the trainer did not stop within {}ms of {}; killing it", grace.count(), signo);
    (void)child_.SignalGroup(SIGKILL);
    SG_ASSIGN_OR_RETURN(ended, child_.Wait(std::nullopt));
  }
  Ended(*ended);
  return *exit_;
}

}  // namespace sg
