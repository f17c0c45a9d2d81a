// Tasks run one at a time, in order, on a thread of their own, so that a
// task stuck in a request that never answers holds up nothing but the tasks
// behind it. The thread is detached; Drain waits with a bound. Used for
// what may wait (event records, retention, the lease's release) while the
// caller keeps watching what may not.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "common/crypto.h"

namespace sg {

class BackgroundQueue {
 public:
  // The thread starts with the first task, so that it inherits the signal
  // mask its owner has set by then.
  // `run_inline`: Post runs the task at once on the caller's thread (for
  // tests that drive every interleaving themselves).
  explicit BackgroundQueue(bool run_inline = false)
      : inline_(run_inline), state_(std::make_shared<State>()) {}
  // Stops the thread once the tasks queued by then are done (it is not
  // waited for).
  ~BackgroundQueue() {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->closing = true;
    state_->changed.notify_all();
  }
  BackgroundQueue(const BackgroundQueue&) = delete;
  BackgroundQueue& operator=(const BackgroundQueue&) = delete;

  void Post(std::function<void()> task) {
    if (inline_) {
      task();
      return;
    }
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->tasks.push_back(std::move(task));
    state_->changed.notify_all();
    if (!started_) {
      started_ = true;
      std::thread([state = state_] { Work(*state); }).detach();
    }
  }
  // Waits up to `limit` for every task posted so far to finish; true when
  // they have.
  bool DrainFor(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(state_->mu);
    return state_->changed.wait_for(lock, limit,
                                    [&] { return state_->tasks.empty() && !state_->running; });
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable changed;
    std::deque<std::function<void()>> tasks;
    bool running = false;
    bool closing = false;
  };
  static void Work(State& s) {
    std::unique_lock<std::mutex> lock(s.mu);
    while (true) {
      s.changed.wait(lock, [&] { return !s.tasks.empty() || s.closing; });
      if (s.tasks.empty()) return;  // closing, nothing left
      std::function<void()> task = std::move(s.tasks.front());
      s.tasks.pop_front();
      s.running = true;
      lock.unlock();
      task();
      // Before the task counts as done: the process may end right after a
      // drain, before this detached thread's exit would free it
      // (common/crypto.h).
      ReleaseThreadCryptoState();
      lock.lock();
      s.running = false;
      s.changed.notify_all();
    }
  }
  const bool inline_;
  std::shared_ptr<State> state_;
  bool started_ = false;  // guarded by state_->mu
};

}  // namespace sg
