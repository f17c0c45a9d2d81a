// The one crash backoff of one node and of a group (docs/agent.md; docs/multi-node.md).
#pragma once

#include <algorithm>
#include <chrono>

namespace sg {

// How long to wait before the restart after `failures` failures in a row:
// `backoff`, doubled for each further failure, at most `max_backoff`; 0
// without a failure. One node's trainer restarts after this; a group's
// coordinator plans the round after `failures` rounds in a row ended by a crash.
inline std::chrono::milliseconds RestartBackoff(int failures, std::chrono::milliseconds backoff,
                                                std::chrono::milliseconds max_backoff) {
  if (failures <= 0) return std::chrono::milliseconds(0);
  std::chrono::milliseconds wait = backoff;
  for (int i = 1; i < failures && wait < max_backoff; ++i) wait *= 2;
  return std::min(wait, max_backoff);
}

}  // namespace sg
