// One call run on a thread of its own, whose result the caller polls or
// waits for with a bound. The thread is detached: a call stuck in a request
// that never answers never holds up the caller, which may give up on it
// (and must then keep what the call uses alive, or end the process).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "common/crypto.h"

namespace sg {

template <typename T>
class BackgroundCall {
 public:
  // `run_inline`: Start runs the call at once on the caller's thread (for
  // tests that drive every interleaving themselves).
  explicit BackgroundCall(bool run_inline = false) : inline_(run_inline) {}
  // Where the call runs: given a task, runs it now or later, on any thread
  // (tests pass one that runs it when their world says); empty: a thread of
  // its own. WaitFor must then not be used with a runner that needs the
  // caller's thread to go on.
  using Runner = std::function<void(std::function<void()>)>;
  explicit BackgroundCall(Runner runner) : inline_(false), runner_(std::move(runner)) {}
  // Starts `fn` on a new thread. A call still running is left to itself.
  void Start(std::function<T()> fn) {
    state_ = std::make_shared<State>();
    if (inline_) {
      state_->result.emplace(fn());
      return;
    }
    if (runner_) {
      runner_([state = state_, fn = std::move(fn)]() mutable {
        T result = fn();
        std::lock_guard<std::mutex> lock(state->mu);
        state->result.emplace(std::move(result));
        state->done.notify_all();
      });
      return;
    }
    std::thread([state = state_, fn = std::move(fn)]() mutable {
      T result = fn();
      // The caller may end the process as soon as it has the result, before
      // this thread's exit frees OpenSSL's state for it (a leak to
      // LeakSanitizer, found by the fencing trials after the logs' flush).
      ReleaseThreadCryptoState();
      std::lock_guard<std::mutex> lock(state->mu);
      state->result.emplace(std::move(result));
      state->done.notify_all();
    }).detach();
  }
  // A call was started and its result not yet taken.
  bool busy() const { return state_ != nullptr; }
  // The result once the call has returned (taken: busy() is false after);
  // nullopt while it runs or when none was started. Never blocks.
  std::optional<T> Poll() { return WaitFor(std::chrono::milliseconds(0)); }
  // Like Poll, waiting up to `limit` for the call to return.
  std::optional<T> WaitFor(std::chrono::milliseconds limit) {
    if (!state_) return std::nullopt;
    std::unique_lock<std::mutex> lock(state_->mu);
    if (!state_->done.wait_for(lock, limit, [&] { return state_->result.has_value(); })) {
      return std::nullopt;
    }
    std::optional<T> out = std::move(state_->result);
    lock.unlock();
    state_.reset();
    return out;
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable done;
    std::optional<T> result;
  };
  const bool inline_;
  const Runner runner_;
  std::shared_ptr<State> state_;
};

}  // namespace sg
