// Waiting in a test for a state to be reached: polls `done` every 100 ms
// until it holds or `timeout` has passed, and answers it once more at the
// end. The verdict is what `done` says, never how long it took.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace sg::testing {

inline bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return done();
}

}  // namespace sg::testing
