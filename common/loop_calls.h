// Calls that may wait (store requests) made off an event loop: they run one
// at a time, in the order posted, on a thread of their own, and each result
// comes back to the loop, which takes it when it next calls Deliver. The
// loop never waits for a call, and every result is handed to the code that
// posted the call (nothing is thrown away unread).
//
// Calls run in order, so a call posted after a write sees that write. A
// call stuck in a request that never answers holds up the calls behind it,
// not the loop.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "common/background_queue.h"

namespace sg {

class LoopCalls {
 public:
  // Where the calls run: given a task, runs it (now or later, on any
  // thread, one at a time and in order). Tests pass one that runs the tasks
  // when their world says, so that no thread's speed decides what happens.
  using Runner = std::function<void(std::function<void()>)>;

  // `runner` empty: a thread of the calls' own.
  explicit LoopCalls(Runner runner = nullptr)
      : runner_(std::move(runner)), state_(std::make_shared<State>()) {}
  LoopCalls(const LoopCalls&) = delete;
  LoopCalls& operator=(const LoopCalls&) = delete;

  // Runs `call` off the loop; `then` gets its result on the loop (Deliver).
  template <typename T>
  void Post(std::function<T()> call, std::function<void(T&)> then) {
    ++posted_;
    auto task = [state = state_, call = std::move(call), then = std::move(then)]() mutable {
      auto result = std::make_shared<T>(call());
      std::lock_guard<std::mutex> lock(state->mu);
      state->results.push_back([result, then = std::move(then)] { then(*result); });
    };
    if (runner_) {
      runner_(std::move(task));
    } else {
      queue_.Post(std::move(task));
    }
  }
  // A call whose result the loop does not act on beyond `then` being run
  // after it (a log line, a flag).
  void Post(std::function<void()> call, std::function<void()> then = [] {}) {
    Post<bool>(
        [call = std::move(call)] {
          call();
          return true;
        },
        [then = std::move(then)](bool&) { then(); });
  }

  // On the loop: hands every result that came back to its `then`, in order.
  void Deliver() {
    while (true) {
      std::function<void()> next;
      {
        std::lock_guard<std::mutex> lock(state_->mu);
        if (state_->results.empty()) return;
        next = std::move(state_->results.front());
        state_->results.pop_front();
      }
      ++delivered_;
      next();
    }
  }
  // Calls posted whose results were not delivered yet.
  uint64_t pending() const { return posted_ - delivered_; }

 private:
  struct State {
    std::mutex mu;
    std::deque<std::function<void()>> results;
  };
  const Runner runner_;
  BackgroundQueue queue_;
  std::shared_ptr<State> state_;
  uint64_t posted_ = 0;
  uint64_t delivered_ = 0;
};

}  // namespace sg
