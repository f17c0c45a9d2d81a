// The group agent's watch (agent/group/group_watch.h; docs/design.md §14).
#include "agent/group/group_watch.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "agent/run/notice_file.h"

#include "agent/config/exit_codes.h"
#include "agent/run/job_start.h"
#include "agent/run/notice_budget.h"
#include "common/files.h"
#include "common/log.h"
#include "common/signal_names.h"

namespace sg {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

SharedTrainer::SharedTrainer(std::unique_ptr<Trainer> inner, Slot& slot)
    : inner_(std::move(inner)), slot_(slot) {
  std::lock_guard<std::mutex> lock(slot_.mu);
  slot_.current = inner_.get();
}

SharedTrainer::~SharedTrainer() {
  std::unique_ptr<Trainer> inner;
  {
    std::lock_guard<std::mutex> lock(slot_.mu);
    if (slot_.current == inner_.get()) slot_.current = nullptr;
    inner = std::move(inner_);
  }
}

bool SharedTrainer::running() const {
  std::lock_guard<std::mutex> lock(slot_.mu);
  return inner_->running();
}

std::optional<ExitStatus> SharedTrainer::Poll() {
  std::lock_guard<std::mutex> lock(slot_.mu);
  return inner_->Poll();
}

Status SharedTrainer::Signal(int signo) {
  std::lock_guard<std::mutex> lock(slot_.mu);
  return inner_->Signal(signo);
}

Status SharedTrainer::SignalWorkers(int signo) {
  std::lock_guard<std::mutex> lock(slot_.mu);
  return inner_->SignalWorkers(signo);
}

StatusOr<ExitStatus> SharedTrainer::Stop(int signo, milliseconds grace) {
  std::lock_guard<std::mutex> lock(slot_.mu);
  return inner_->Stop(signo, grace);
}

bool SharedTrainer::GroupLingers() {
  std::lock_guard<std::mutex> lock(slot_.mu);
  return inner_->GroupLingers();
}

GroupWatch::GroupWatch(GroupWatchOptions options, Clock& clock, InterruptionMonitor* monitor,
                       int signal_fd, SharedTrainer::Slot& slot, ExitFn exit)
    : o_(std::move(options)),
      clock_(clock),
      monitor_(monitor),
      signal_fd_(signal_fd),
      slot_(slot),
      exit_(std::move(exit)) {
  if (!exit_) {
    exit_ = [](int code) {
      spdlog::default_logger()->flush();
      std::_Exit(code);
    };
  }
}

GroupWatch::~GroupWatch() { Stop(); }

void GroupWatch::Start() {
  thread_ = std::thread([this] { Run(); });
}

void GroupWatch::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

GroupWatch::News GroupWatch::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  News out = std::move(news_);
  news_ = News{};
  return out;
}

std::optional<Clock::WallTime> GroupWatch::asked_at() const {
  std::lock_guard<std::mutex> lock(mu_);
  return asked_at_;
}

std::optional<Clock::MonoTime> GroupWatch::deadline() const {
  std::lock_guard<std::mutex> lock(mu_);
  return deadline_;
}

void GroupWatch::Run() {
  while (!stop_) {
    bool signalled = false;
    if (signal_fd_ >= 0) {
      pollfd fd{signal_fd_, POLLIN, 0};
      if (::poll(&fd, 1, 100) > 0) signalled = StopSignalArrived(signal_fd_);
    } else {
      ::usleep(100'000);
    }
    Turn(signalled);
  }
}

void GroupWatch::Turn(bool signalled) {
  const auto now = clock_.Monotonic();
  if (signalled) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      news_.stop_signal = true;
    }
    Act("SIGTERM", now + o_.stop_timeout, nullptr);
  }
  if (monitor_ && now >= next_poll_) {
    next_poll_ = now + o_.poll_interval;
    for (const InterruptionEvent& e : monitor_->PollOnce()) {
      if (!e.IsNotice()) {
        std::lock_guard<std::mutex> lock(mu_);
        news_.others.push_back(e);  // the loop decides (on_rebalance)
        continue;
      }
      milliseconds left = o_.untimed_budget;
      double late = 0;
      if (e.time) {
        left = duration_cast<milliseconds>(*e.time - clock_.Now());
        late = std::max(0.0, std::chrono::duration<double>(kNoticeLead - left).count());
      }
      LogWarn("INTERRUPTION NOTICE: {} (read {:.1f}s after it was posted)", e.Describe(), late);
      {
        std::lock_guard<std::mutex> lock(mu_);
        news_.notices.push_back(e);
      }
      Act("the notice", now + left, &e);
    }
  }
  Backstop(now);
}

void GroupWatch::Act(const std::string& why, Clock::MonoTime deadline,
                     const InterruptionEvent* notice) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (deadline_ && *deadline_ <= deadline) return;  // acted already, for an earlier deadline
    const bool first = !deadline_;
    deadline_ = deadline;
    if (!first) return;
  }
  // Asked at once: the loop may be held by the store for a while.
  const uint64_t round = round_.load();
  const std::optional<uint64_t> in_round = round ? std::optional<uint64_t>(round) : std::nullopt;
  const nlohmann::ordered_json body = notice ? NoticeFileJson(*notice, in_round)
                                             : RequestFileJson(clock_.Now(), why, in_round);
  if (Status st = WriteNoticeFile(o_.notice_file, body); !st.ok()) {
    LogWarn("writing the notice file failed: {}", st.message());
  }
  const auto asked_at = clock_.Now();
  if (o_.checkpoint_signal) {
    std::lock_guard<std::mutex> lock(slot_.mu);
    if (slot_.current && slot_.current->running() &&
        SendCheckpointSignal(*slot_.current, *o_.checkpoint_signal, o_.signal_target).ok()) {
      LogInfo("asked the trainer{} for a checkpoint ({}) on {}",
              o_.signal_target == SignalTarget::kWorkers ? "'s workers" : "",
              SignalName(*o_.checkpoint_signal), why);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  asked_at_ = asked_at;
}

void GroupWatch::Backstop(Clock::MonoTime now) {
  const std::optional<Clock::MonoTime> deadline = this->deadline();
  if (!deadline) return;
  if (!stopped_trainer_ && !loop_stops_ && now >= *deadline - o_.give_up_before + o_.slack) {
    stopped_trainer_ = true;
    std::lock_guard<std::mutex> lock(slot_.mu);
    if (slot_.current && slot_.current->running()) {
      LogError("the agent's loop is held by the store past the round's end: stopping the "
               "trainer from the watch");
      const auto grace = std::clamp(
          duration_cast<milliseconds>(*deadline - o_.exit_before - clock_.Monotonic()),
          milliseconds(0), o_.stop_grace);
      if (auto stopped = slot_.current->Stop(o_.stop_signal, grace); stopped.ok()) {
        LogInfo("the trainer stopped: {}", stopped->ToString());
      }
    }
  }
  if (clock_.Monotonic() >= *deadline - o_.exit_before) {
    const int chosen = exit_code_.load();
    const int code = chosen >= 0 ? chosen : kExitNotCommitted;
    LogError("the deadline is a second away and the agent's loop is still held by the store: "
             "exiting {}", code);
    stop_ = true;
    exit_(code);
  }
}

}  // namespace sg
