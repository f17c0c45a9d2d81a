// The trainer as a child process (docs/design.md §11): started from an argv vector
// (never a shell) in its own process group, stdin from /dev/null, its output
// forwarded line by line to the agent's log and to the log capture, placeholders expanded,
// resume_args appended only when resuming, and the SPOTGUARD_* environment.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agent/config/config.h"
#include "agent/trainer/job_ports.h"
#include "common/files.h"
#include "common/process.h"

namespace sg {

// Where this node stands in a multi-node round (docs/multi-node.md).
struct GroupPlacement {
  uint64_t round = 0;
  int rank = 0;
  std::vector<std::string> addresses;  // every member's, in rank order; [0] is the master
  int port = 0;                        // the master's rendezvous port, also TF's task port
};

struct TrainerLaunch {
  std::string resume;  // absolute path to resume from; "" when starting fresh
  int attempt = 1;     // 1 for the first start, +1 for every restart
  // Set for a job of several nodes; a job of one node gets the values of a
  // group of one in the placeholders and none of the group's environment.
  std::optional<GroupPlacement> group;
};

// TF_CONFIG for `g`: the chief is rank 0, the workers the other ranks in
// order, every task at its address and g.port.
std::string TfConfigOf(const GroupPlacement& g);

// The trainer's argv: command (+ resume_args when resuming), with {resume},
// {checkpoint_dir}, {job}, {attempt}, {index} and the group's {node_rank},
// {nnodes}, {master_addr}, {master_port} and {round} replaced and {{ / }} made literal
// braces (agent/config/placeholders.h).
std::vector<std::string> TrainerArgv(const Config& config, const TrainerLaunch& launch);

// The trainer's environment: the agent's own minus systemd's NOTIFY_SOCKET
// and WATCHDOG_*, plus SPOTGUARD_RESUME_FROM, _CHECKPOINT_DIR, _JOB,
// _ATTEMPT and _NOTICE_FILE; in a group also SPOTGUARD_NODE_RANK, _NNODES,
// _ROUND, MASTER_ADDR, MASTER_PORT and TF_CONFIG.
std::map<std::string, std::string> TrainerEnvironment(const std::map<std::string, std::string>& env,
                                                      const Config& config,
                                                      const TrainerLaunch& launch,
                                                      const std::string& notice_file);

enum class TrainerStream { kStdout, kStderr };
// Receives each line of the trainer's output (without '\n'; `cut`: it was
// longer than kMaxLogLineBytes and is its first part), on the forwarder's
// thread (docs/design.md §13). Returns false when it has no room for the
// line now and `may_wait`: the forwarder keeps the line, reads no more of
// the trainer's output and offers it again (back-pressure on the forwarder
// only). Without `may_wait` (the forwarder is finishing) a line without room
// is dropped.
using TrainerOutputSink =
    std::function<bool(TrainerStream stream, std::string_view line, bool cut, bool may_wait)>;

// Stopping (docs/design.md §11): the stop signal goes to the trainer's whole
// process group and SIGKILL follows after the grace, whether the trainer
// itself still runs or has already exited and left processes in its group
// (the group's guard keeps its id ours until then). The output forwarder
// never keeps anything waiting: once the group has ended it forwards what
// is buffered and stops, even if a process that left the group still holds
// the pipe.
class TrainerProcess final : public Trainer {
 public:
  // The trainer dies with the agent (SpawnOptions::die_with_parent).
  // REQUIRES: called from the thread that outlives the trainer (the agent's
  // main thread). `record_path` (when not empty) receives the trainer's
  // TrainerRecord until it has been reaped.
  static StatusOr<std::unique_ptr<TrainerProcess>> Start(
      const Config& config, const std::map<std::string, std::string>& env,
      const TrainerLaunch& launch, const std::string& notice_file,
      const std::string& record_path = "", TrainerOutputSink sink = nullptr);
  // A running trainer is stopped (stop_signal, SIGKILL after stop_grace).
  // Processes an exited trainer left in its group, still within their
  // stop_grace, are finished on a thread of their own (FinishStoppedTrainers),
  // so destroying a crashed trainer never blocks the agent's loop.
  ~TrainerProcess() override;

  pid_t pid() const { return pid_; }
  bool running() const override { return child_.running(); }
  // The exit status once it ended; nullopt while it runs. Never blocks. When
  // the trainer has ended and left processes in its group, they get
  // stop_signal now and SIGKILL stop_grace later.
  std::optional<ExitStatus> Poll() override;
  Status Signal(int signo) override;
  Status SignalWorkers(int signo) override;
  // `signo` to the group, SIGKILL after `grace` to whatever is left of it
  // (the trainer or what it left behind); returns how the trainer ended.
  StatusOr<ExitStatus> Stop(int signo, std::chrono::milliseconds grace) override;
  bool GroupLingers() override;

 private:
  TrainerProcess(ChildProcess child, std::array<int, 2> output_fds, std::string record_path,
                 const Config& config, TrainerOutputSink sink);
  // After the trainer was reaped: what it left in its group gets
  // stop_signal, or the group is ended at once when nothing is left.
  void StopLeftovers();
  // Ends `child`'s group by `deadline` (SIGKILL then).
  static void EndLeftovers(ChildProcess& child, std::chrono::steady_clock::time_point deadline,
                           pid_t pid, int signo, std::chrono::milliseconds grace);

  ChildProcess child_;
  pid_t pid_;
  std::string record_path_;
  int stop_signal_;
  std::chrono::milliseconds stop_grace_;
  // Set while what the exited trainer left in its group is being stopped.
  std::optional<std::chrono::steady_clock::time_point> leftovers_deadline_;
  UniqueFd wake_;  // eventfd: written when the forwarder is to finish
  std::thread forwarder_;
  std::optional<ExitStatus> exit_;
};

// Waits for the groups of destroyed trainers that were still being stopped:
// at most until their stop_grace has passed, plus what SIGKILL takes. The
// agent calls it before it exits.
void FinishStoppedTrainers();

}  // namespace sg
