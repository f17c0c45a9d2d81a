// The trainer as a child process (docs/design.md §11): started from an argv vector
// (never a shell) in its own process group, stdin from /dev/null, its output
// forwarded line by line to the agent's log, placeholders expanded,
// resume_args appended only when resuming, and the SPOTGUARD_* environment.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/config.h"
#include "agent/job_ports.h"
#include "common/process.h"

namespace sg {

struct TrainerLaunch {
  std::string resume;  // absolute path to resume from; "" when starting fresh
  int attempt = 1;     // 1 for the first start, +1 for every restart
};

// The trainer's argv: command (+ resume_args when resuming), with {resume},
// {checkpoint_dir}, {job} and {attempt} replaced and {{ / }} made literal
// braces (agent/placeholders.h).
std::vector<std::string> TrainerArgv(const Config& config, const TrainerLaunch& launch);

// The trainer's environment: the agent's own minus systemd's NOTIFY_SOCKET
// and WATCHDOG_*, plus SPOTGUARD_RESUME_FROM, _CHECKPOINT_DIR, _JOB,
// _ATTEMPT and _NOTICE_FILE.
std::map<std::string, std::string> TrainerEnvironment(const std::map<std::string, std::string>& env,
                                                      const Config& config,
                                                      const TrainerLaunch& launch,
                                                      const std::string& notice_file);

class TrainerProcess final : public Trainer {
 public:
  // The trainer dies with the agent (SpawnOptions::die_with_parent).
  // REQUIRES: called from the thread that outlives the trainer (the agent's
  // main thread). `record_path` (when not empty) receives the trainer's
  // TrainerRecord until it has been reaped.
  static StatusOr<std::unique_ptr<TrainerProcess>> Start(
      const Config& config, const std::map<std::string, std::string>& env,
      const TrainerLaunch& launch, const std::string& notice_file,
      const std::string& record_path = "");
  ~TrainerProcess() override;  // kills the group if still running; joins the log thread

  pid_t pid() const { return child_.pid(); }
  bool running() const override { return child_.running(); }
  // The exit status once it ended; nullopt while it runs. Never blocks.
  std::optional<ExitStatus> Poll() override;
  Status Signal(int signo) override;
  // `signo` to the group, SIGKILL after `grace`; returns how it ended.
  StatusOr<ExitStatus> Stop(int signo, std::chrono::milliseconds grace) override;

 private:
  TrainerProcess(ChildProcess child, int output_fd, std::string record_path);
  void Ended(const ExitStatus& status);
  ChildProcess child_;
  std::string record_path_;
  std::thread forwarder_;
  std::optional<ExitStatus> exit_;
};

}  // namespace sg
