// Group records as tests write them by hand (agent/repo/group_protocol.h).
#pragma once

#include <string>

#include "agent/repo/group_protocol.h"

namespace sg::testing {

// Group snapshot 1 of round 1: `nodes` parts of `step`, none of them stored.
// A record for an agent to refuse, not one to restore.
inline GroupCommit RecordOnlyGroupCommit(int nodes, int64_t step) {
  GroupCommit g;
  g.seq = 1;
  g.round = 1;
  g.nodes = nodes;
  g.step = step;
  g.generation = 1;
  g.created = "2026-11-27T00:00:00Z";
  for (int rank = 0; rank < nodes; ++rank) {
    g.parts.push_back(PartRecord{rank, step, 1, "i-old" + std::to_string(rank), 100, 50});
  }
  return g;
}

}  // namespace sg::testing
