// Checks the fake multi-node world's tests share (tests/unit/group_world*_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "agent/repo/group_store.h"
#include "agent/repo/store_layout.h"
#include "tests/support/fake_group_world.h"

namespace sg::testing {

// Whether node `n`'s trainers ever got `signo`.
inline bool GotSignal(const WorldNode& n, int signo) {
  return std::find(n.signals.begin(), n.signals.end(), signo) != n.signals.end();
}

// The finals an uninterrupted run of `nodes` ranks ends with, sorted.
inline std::vector<std::string> ExpectedFinals(int nodes, int steps) {
  std::vector<std::string> out;
  for (int r = 0; r < nodes; ++r) {
    out.push_back(std::to_string(r) + " " + std::to_string(steps) + " " +
                  std::to_string(ExpectedTotal(r, steps)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Why `round` ended first ("" while it has not; retention removes the
// records of old rounds, so tests read this while the round is recent).
inline std::string FirstEnd(FakeGroupWorld& w, uint64_t round) {
  const std::vector<std::string> reasons = w.EndReasons(round);
  return reasons.empty() ? "" : reasons.front();
}

inline std::vector<std::string> Finals(FakeGroupWorld& w, int nodes) {
  std::vector<std::string> out;
  for (int s = 0; s < nodes; ++s) out.push_back(w.node(s).final.value_or("(none)"));
  std::sort(out.begin(), out.end());
  return out;
}

// Every group snapshot in the store is whole: one part per rank, each of
// the same step and readable, with the content that rank saved at that step.
inline void ExpectWholeGroupSnapshots(FakeGroupWorld& w, int nodes) {
  auto groups = GroupStore(w.store, "job").Groups();
  ASSERT_TRUE(groups.ok()) << groups.status().ToString();
  for (const GroupCommit& g : *groups) {
    ASSERT_EQ(static_cast<int>(g.parts.size()), nodes) << "group snapshot " << g.seq;
    for (int rank = 0; rank < nodes; ++rank) {
      EXPECT_EQ(g.parts[rank].rank, rank);
      EXPECT_EQ(g.parts[rank].step, g.step) << "group snapshot " << g.seq << " rank " << rank;
      EXPECT_TRUE(w.store.Head(ManifestKey(PartJob("job", rank), g.parts[rank].seq)).ok())
          << "group snapshot " << g.seq << " names rank " << rank << "'s part "
          << g.parts[rank].seq << ", which is not in the store";
    }
  }
}

}  // namespace sg::testing
