#include "agent/trainer/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>

#include "agent/config/placeholders.h"
#include "agent/trainer/trainer_record.h"
#include "common/duration.h"
#include "common/files.h"
#include "common/log.h"
#include "common/log_lines.h"
#include "common/signal_names.h"

namespace sg {
namespace {

// The engine's attempt when it numbers them (AWS_BATCH_JOB_ATTEMPT), else the
// trainer's start within this run (docs/config.md, "Placeholders").
int64_t AttemptOf(const Config& config, const TrainerLaunch& launch) {
  return config.engine_attempt.value_or(launch.attempt);
}

std::string Expand(const std::string& arg, const Config& config, const TrainerLaunch& launch) {
  return ExpandPlaceholders(arg, [&](std::string_view name) -> std::optional<std::string> {
    if (name == "resume") return launch.resume;
    if (name == "checkpoint_dir") return config.checkpoint_dir;
    if (name == "job") return config.job;
    if (name == "attempt") return std::to_string(AttemptOf(config, launch));
    if (name == "index" && config.index) return std::to_string(*config.index);
    // A job of one node is a group of one: rank 0 of 1, its own master.
    const GroupPlacement* g = launch.group ? &*launch.group : nullptr;
    if (name == "node_rank") return std::to_string(g ? g->rank : 0);
    if (name == "nnodes") return std::to_string(g ? g->addresses.size() : 1);
    if (name == "master_addr") {
      return g && !g->addresses.empty() ? g->addresses.front() : std::string("127.0.0.1");
    }
    if (name == "master_port") return std::to_string(g ? g->port : config.group.port);
    if (name == "round") return std::to_string(g ? g->round : 0);
    return std::nullopt;  // refused by the config check; kept as written
  });
}

constexpr size_t kMaxDrainBytes = 1 << 20;
// How often a forwarder whose sink has no room offers the line again.
constexpr int kRoomRetryMs = 20;

// Copies the trainer's output (`fds`: stdout and stderr, non-blocking) to
// the agent's stderr (the journal), one line per entry, and to `sink`,
// until both reach end of file or until `wake` is written: then it forwards
// what is already buffered (up to kMaxDrainBytes) and stops, so a
// descendant that left the group holding a pipe keeps no one waiting.
// Lines are cut at kMaxLogLineBytes, so memory stays bounded. The copy to
// stderr never waits (common/log_queue.h: dropped while stderr is blocked);
// the sink may make the forwarder wait for room until `wake` is written.
void Forward(std::array<int, 2> fds, int wake, pid_t pid, TrainerOutputSink sink) {
  std::array<LineSplitter, 2> splitters;
  const std::string label = Format("[trainer {}] ", pid);
  bool finishing = false;
  auto emit_for = [&](TrainerStream stream) {
    return [&, stream](std::string_view line, bool cut) {
      std::string text = label;
      text.append(line);
      if (cut) text.append(kCutMark);
      LogInfoUntapped(text);
      if (!sink) return;
      while (!sink(stream, line, cut, /*may_wait=*/!finishing)) {
        pollfd p{wake, POLLIN, 0};
        if (::poll(&p, 1, kRoomRetryMs) > 0) finishing = true;
      }
    };
  };
  const LineSplitter::Emit emits[2] = {emit_for(TrainerStream::kStdout),
                                       emit_for(TrainerStream::kStderr)};
  char buf[16384];
  bool open[2] = {true, true};
  size_t drained = 0;
  while ((open[0] || open[1]) && !(finishing && drained >= kMaxDrainBytes)) {
    if (!finishing) {
      pollfd pfds[3] = {{open[0] ? fds[0] : -1, POLLIN, 0},
                        {open[1] ? fds[1] : -1, POLLIN, 0},
                        {wake, POLLIN, 0}};
      if (::poll(pfds, 3, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (pfds[2].revents != 0) finishing = true;
    }
    bool any = false;
    for (int i = 0; i < 2; ++i) {
      if (!open[i]) continue;
      const ssize_t n = ::read(fds[i], buf, sizeof buf);
      if (n < 0 && errno == EINTR) {
        any = true;
        continue;
      }
      if (n < 0 && errno == EAGAIN) continue;
      if (n <= 0) {  // end of file or an error
        open[i] = false;
        continue;
      }
      any = true;
      splitters[i].Feed(std::string_view(buf, static_cast<size_t>(n)), emits[i]);
      if (finishing) drained += static_cast<size_t>(n);
    }
    if (finishing && !any) break;  // nothing more buffered
  }
  for (int i = 0; i < 2; ++i) {
    splitters[i].Finish(emits[i]);
    ::close(fds[i]);
  }
}

// Tells the forwarder to finish and waits for it (it no longer blocks).
void StopForwarder(const UniqueFd& wake, std::thread& forwarder) {
  const uint64_t one = 1;
  if (wake.valid()) (void)!::write(wake.get(), &one, sizeof one);
  if (forwarder.joinable()) forwarder.join();
}

// Trainers destroyed while what they left in their group still had time to
// stop: each finished on a thread of its own until FinishStoppedTrainers.
class StoppingTrainers {
 public:
  void Add(std::thread t) {
    std::lock_guard<std::mutex> lock(mu_);
    threads_.push_back(std::move(t));
  }
  void JoinAll() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }
  ~StoppingTrainers() { JoinAll(); }

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

StoppingTrainers& Stopping() {
  static StoppingTrainers stopping;
  return stopping;
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
  out["SPOTGUARD_ATTEMPT"] = std::to_string(AttemptOf(config, launch));
  if (config.index) out["SPOTGUARD_INDEX"] = std::to_string(*config.index);
  out["SPOTGUARD_NOTICE_FILE"] = notice_file;
  if (const auto& g = launch.group) {
    out["SPOTGUARD_NODE_RANK"] = std::to_string(g->rank);
    out["SPOTGUARD_NNODES"] = std::to_string(g->addresses.size());
    out["SPOTGUARD_ROUND"] = std::to_string(g->round);
    out["MASTER_ADDR"] = g->addresses.empty() ? "" : g->addresses.front();
    out["MASTER_PORT"] = std::to_string(g->port);
    out["TF_CONFIG"] = TfConfigOf(*g);
  }
  return out;
}

std::string TfConfigOf(const GroupPlacement& g) {
  nlohmann::ordered_json cluster;
  const std::string port = ":" + std::to_string(g.port);
  cluster["chief"] = nlohmann::ordered_json::array();
  cluster["worker"] = nlohmann::ordered_json::array();
  for (size_t r = 0; r < g.addresses.size(); ++r) {
    cluster[r == 0 ? "chief" : "worker"].push_back(g.addresses[r] + port);
  }
  nlohmann::ordered_json tf;
  tf["cluster"] = std::move(cluster);
  tf["task"] = {{"type", g.rank == 0 ? "chief" : "worker"}, {"index", g.rank == 0 ? 0 : g.rank - 1}};
  return tf.dump();
}

TrainerProcess::TrainerProcess(ChildProcess child, std::array<int, 2> output_fds,
                               std::string record_path, const Config& config,
                               TrainerOutputSink sink)
    : child_(std::move(child)),
      pid_(child_.pid()),
      record_path_(std::move(record_path)),
      stop_signal_(config.stop_signal),
      stop_grace_(config.stop_grace),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!wake_.valid()) LogWarn("eventfd for the trainer's output: {}", std::strerror(errno));
  forwarder_ = std::thread(Forward, output_fds, wake_.get(), pid_, std::move(sink));
}

TrainerProcess::~TrainerProcess() {
  if (child_.running()) (void)Stop(stop_signal_, stop_grace_);
  if (leftovers_deadline_ && std::chrono::steady_clock::now() < *leftovers_deadline_) {
    // Not on the loop's time: a thread ends the group by its deadline.
    Stopping().Add(std::thread([child = std::move(child_), deadline = *leftovers_deadline_,
                                wake = std::move(wake_), forwarder = std::move(forwarder_),
                                pid = pid_, signo = stop_signal_, grace = stop_grace_]() mutable {
      TrainerProcess::EndLeftovers(child, deadline, pid, signo, grace);
      StopForwarder(wake, forwarder);
    }));
    return;
  }
  if (leftovers_deadline_) {
    EndLeftovers(child_, *leftovers_deadline_, pid_, stop_signal_, stop_grace_);
  }
  StopForwarder(wake_, forwarder_);
}

void TrainerProcess::EndLeftovers(ChildProcess& child,
                                  std::chrono::steady_clock::time_point deadline, pid_t pid,
                                  int signo, std::chrono::milliseconds grace) {
  bool killed = false;
  (void)child.EndGroup(deadline, &killed);
  if (killed) {
    LogWarn(
        "processes the trainer (pid {}) left in its process group did not end within {} of {}; "
        "killed them with SIGKILL",
        pid, FormatDuration(grace), SignalName(signo));
  }
}

void TrainerProcess::StopLeftovers() {
  const std::vector<pid_t> left = child_.GroupMembers();
  if (left.empty()) {
    EndLeftovers(child_, std::chrono::steady_clock::now(), pid_, stop_signal_, stop_grace_);
    return;
  }
  std::string pids;
  for (pid_t p : left) pids += (pids.empty() ? "" : " ") + std::to_string(p);
  LogInfo(
      "the trainer (pid {}) ended and left {} process(es) in its process group ({}): sending "
      "them {}, SIGKILL after {}",
      pid_, left.size(), pids, SignalName(stop_signal_), FormatDuration(stop_grace_));
  (void)child_.SignalGroup(stop_signal_);
  leftovers_deadline_ = std::chrono::steady_clock::now() + stop_grace_;
}

StatusOr<std::unique_ptr<TrainerProcess>> TrainerProcess::Start(
    const Config& config, const std::map<std::string, std::string>& env,
    const TrainerLaunch& launch, const std::string& notice_file, const std::string& record_path,
    TrainerOutputSink sink) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  UniqueFd read_end(out_pipe[0]), write_end(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  UniqueFd err_read_end(err_pipe[0]), err_write_end(err_pipe[1]);
  SpawnOptions spawn;
  spawn.argv = TrainerArgv(config, launch);
  spawn.env = TrainerEnvironment(env, config, launch, notice_file);
  spawn.stdout_fd = write_end.get();
  spawn.stderr_fd = err_write_end.get();
  spawn.die_with_parent = true;
  SG_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(spawn));
  write_end.reset();  // the child holds the only write ends now
  err_write_end.reset();
  // Never blocks the forwarder once it is told to finish (Forward).
  for (const UniqueFd* fd : {&read_end, &err_read_end}) {
    if (::fcntl(fd->get(), F_SETFL, ::fcntl(fd->get(), F_GETFL) | O_NONBLOCK) != 0) {
      return Status::FromErrno(errno, "make the trainer's output pipe non-blocking");
    }
  }
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
      new TrainerProcess(std::move(child), {read_end.release(), err_read_end.release()},
                         record_path, config, std::move(sink)));
}

std::optional<ExitStatus> TrainerProcess::Poll() {
  if (exit_) return exit_;
  auto r = child_.Wait(std::chrono::milliseconds(0));
  if (r.ok() && r->has_value()) {
    exit_ = **r;
    // Reaped: should this agent die now, the guard kills what is left of the
    // group, so nothing of it remains for the next agent to stop.
    if (!record_path_.empty()) RemoveTrainerRecord(record_path_);
    StopLeftovers();
  }
  return exit_;
}

Status TrainerProcess::Signal(int signo) {
  if (exit_ || !child_.running()) return Status::NotFound("the trainer is not running");
  return child_.SignalGroup(signo);
}

Status TrainerProcess::SignalWorkers(int signo) {
  if (exit_ || !child_.running()) return Status::NotFound("the trainer is not running");
  bool any = false;
  for (pid_t member : child_.GroupMembers()) {
    if (member == pid_) continue;
    if (::kill(member, signo) == 0) any = true;
  }
  return any ? Status::Ok() : child_.SignalGroup(signo);
}

StatusOr<ExitStatus> TrainerProcess::Stop(int signo, std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  if (exit_) {
    // Ended before: what it left in its group gets no longer than asked.
    if (leftovers_deadline_) {
      EndLeftovers(child_, std::min(*leftovers_deadline_, deadline), pid_, stop_signal_,
                   std::min(stop_grace_, grace));
      leftovers_deadline_.reset();
    }
    return *exit_;
  }
  if (!child_.running()) return Status::NotFound("the trainer is not running");
  (void)child_.SignalGroup(signo);
  bool killed = false;
  SG_ASSIGN_OR_RETURN(const ExitStatus ended, child_.EndGroup(deadline, &killed));
  if (killed) {
    LogWarn("the trainer's process group {} did not end within {} of {}; killed it with SIGKILL",
            pid_, FormatDuration(grace), SignalName(signo));
  }
  exit_ = ended;
  if (!record_path_.empty()) RemoveTrainerRecord(record_path_);
  return *exit_;
}

bool TrainerProcess::GroupLingers() {
  for (pid_t member : child_.GroupMembers()) {
    if (member != pid_) return true;
  }
  return false;
}

void FinishStoppedTrainers() { Stopping().JoinAll(); }

}  // namespace sg
