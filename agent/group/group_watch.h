// The group agent's watch (docs/design.md §14, "The watch"): the
// interruption monitor and the stop signals, read on a thread of their own,
// so that a store call on the agent's loop (up to 30 s per attempt, retried)
// never delays them.
//
// On a notice or a stop signal the watch acts at once, without the loop: it
// logs the notice, writes the notice file and sends checkpoint_signal to the
// trainer (to its workers under a launcher: agent/trainer/checkpoint_signal.h). The
// loop takes the event when it next comes round and does the group's part
// (ending the round in the store, waiting for the group snapshot). Should
// the loop still be held by the store at the end of the round's budget, the
// watch stops the trainer itself; and a second before the deadline it ends
// the process, with the code the loop chose if it chose one, else 74 (not
// committed).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/trainer/checkpoint_signal.h"
#include "agent/run/interruption_monitor.h"
#include "agent/trainer/job_ports.h"
#include "common/clock.h"

namespace sg {

// The trainer the loop and the watch share: every call holds one lock.
// Wraps the launcher's trainer; the watch reaches it through `Slot`.
class SharedTrainer final : public Trainer {
 public:
  struct Slot {
    std::mutex mu;
    Trainer* current = nullptr;  // the running wrapper's trainer, under mu
  };
  SharedTrainer(std::unique_ptr<Trainer> inner, Slot& slot);
  // Leaves the slot first, then ends the trainer (outside the lock: ending a
  // running one may wait for its grace).
  ~SharedTrainer() override;

  bool running() const override;
  std::optional<ExitStatus> Poll() override;
  Status Signal(int signo) override;
  Status SignalWorkers(int signo) override;
  StatusOr<ExitStatus> Stop(int signo, std::chrono::milliseconds grace) override;
  bool GroupLingers() override;

 private:
  std::unique_ptr<Trainer> inner_;
  Slot& slot_;
};

struct GroupWatchOptions {
  std::string notice_file;
  std::optional<int> checkpoint_signal;
  SignalTarget signal_target = SignalTarget::kTrainer;  // where it goes (CheckpointSignalTarget)
  int stop_signal = 15;
  std::chrono::milliseconds stop_grace{10'000};  // already capped to the leave grace
  std::chrono::milliseconds stop_timeout{90'000};
  Duration poll_interval{2'000};
  // Before the deadline: the round's end is given up on this long before it
  // (the trainer stopped then), the process ends this long before it.
  std::chrono::milliseconds give_up_before{10'000};
  std::chrono::milliseconds exit_before{1'000};
  // The loop is given this long past the give-up time to stop the trainer
  // itself before the watch does.
  std::chrono::milliseconds slack{2'000};
  // How long the deadline is when a notice names no time.
  std::chrono::milliseconds untimed_budget{100'000};
};

class GroupWatch {
 public:
  // What the loop takes from the watch.
  struct News {
    std::vector<InterruptionEvent> notices;
    std::vector<InterruptionEvent> others;  // rebalance recommendations and the like
    bool stop_signal = false;
  };
  // Ends the whole process (tests replace it); `code` is the exit code.
  using ExitFn = std::function<void(int code)>;

  // `monitor` may be null (no metadata service); `signal_fd` < 0 when the
  // stop signals are not read here. `slot` must outlive the watch.
  GroupWatch(GroupWatchOptions options, Clock& clock, InterruptionMonitor* monitor, int signal_fd,
             SharedTrainer::Slot& slot, ExitFn exit = nullptr);
  ~GroupWatch();

  void Start();
  // Stops the thread and waits for it.
  void Stop();

  News Take();
  // The round the trainer is in, for the notice file (0: none).
  void SetRound(uint64_t round) { round_ = round; }
  // The loop has begun stopping the trainer itself (or has none to stop).
  void LoopStopsTrainer() { loop_stops_ = true; }
  // The exit code the loop chose; the watch's last-moment exit uses it.
  void SetExitCode(int code) { exit_code_ = code; }
  // When the watch asked the trainer for a checkpoint (notice file and
  // signal), for the notice or signal the loop is about to take; nullopt
  // while it has not.
  std::optional<Clock::WallTime> asked_at() const;
  // The deadline the watch enforces, on the monotonic clock; nullopt before
  // a notice or a stop signal.
  std::optional<Clock::MonoTime> deadline() const;

  // One turn of the thread's loop (the thread calls it every 100 ms; tests
  // call it directly). `signalled`: a stop signal arrived.
  void Turn(bool signalled);

 private:
  void Run();
  // Writes the notice file (the notice's, or a request's saying `why` when
  // `notice` is null) and sends checkpoint_signal, once.
  void Act(const std::string& why, Clock::MonoTime deadline, const InterruptionEvent* notice);
  void Backstop(Clock::MonoTime now);

  const GroupWatchOptions o_;
  Clock& clock_;
  InterruptionMonitor* monitor_;
  const int signal_fd_;
  SharedTrainer::Slot& slot_;
  ExitFn exit_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> round_{0};
  std::atomic<bool> loop_stops_{false};
  std::atomic<int> exit_code_{-1};

  mutable std::mutex mu_;
  News news_;                               // under mu_
  std::optional<Clock::MonoTime> deadline_;  // under mu_
  std::optional<Clock::WallTime> asked_at_;  // under mu_
  bool stopped_trainer_ = false;             // the watch's thread only
  Clock::MonoTime next_poll_{};              // the watch's thread only
};

}  // namespace sg
