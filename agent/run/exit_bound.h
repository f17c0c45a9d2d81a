// The one bound on an agent's exit (docs/design.md §9): one node's exit and
// a group member's wait for the work still running on the store within it.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

#include "common/clock.h"

namespace sg {

// The exit's one bound on the work still running on the store (uploads,
// restores, the queued records, the lease's release), for every node: never
// past a second before a notice's deadline either (docs/agent.md, "How it ends").
inline constexpr std::chrono::milliseconds kExitBound{15'000};
// The process ends this long before a notice's deadline at the latest.
inline constexpr std::chrono::milliseconds kExitBeforeDeadline{1'000};

// That bound, from the moment the exit's wait begins: every wait of one
// node's exit and of a member's takes what is left of it.
class ExitBound {
 public:
  ExitBound(Clock& clock, std::optional<Clock::MonoTime> deadline)
      : clock_(clock), until_(clock.Monotonic() + kExitBound) {
    if (deadline) until_ = std::min(until_, *deadline - kExitBeforeDeadline);
  }
  Clock::MonoTime until() const { return until_; }
  std::chrono::milliseconds left() const {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(until_ -
                                                                          clock_.Monotonic()));
  }

 private:
  Clock& clock_;
  Clock::MonoTime until_;
};

}  // namespace sg
