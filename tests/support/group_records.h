// Group records as tests write them by hand (agent/repo/group_protocol.h).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "agent/repo/store_layout.h"
#include "agent/repo/group_protocol.h"
#include "agent/repo/snapshot_writer.h"
#include "common/clock.h"
#include "common/object_store.h"
#include "tests/support/capture_in_place.h"

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

// The record of group snapshot `seq` of round `seq` (generation `seq`):
// `nodes` ranks of `step`, its parts still to be added.
inline GroupCommit GroupRecordOf(uint64_t seq, int nodes, int64_t step) {
  return GroupCommit{.seq = seq,
                     .round = seq,
                     .nodes = nodes,
                     .step = step,
                     .generation = seq,
                     .created = "2026-11-29T00:00:00Z",
                     .parts = {}};
}

// Writes `tree` (in a fresh dir `src`) as rank `rank`'s part of `step` of job
// "job", resumed from `resume`, as a node's upload does (frames reused); the
// writer's result goes to `result` when given.
inline PartRecord WriteTreePart(ObjectStore& store, Clock& clock, const std::string& src,
                                const Tree& tree, int rank, int64_t step,
                                const std::string& resume = ".",
                                SnapshotResult* result = nullptr) {
  WriteTree(src, tree);
  auto capture = CaptureTree(src, step, resume);
  EXPECT_TRUE(capture.ok()) << capture.status().ToString();
  if (!capture.ok()) return {};
  SnapshotRequest request;
  request.job = PartJob("job", rank);
  request.instance = "i-" + std::to_string(rank);
  auto written = SnapshotWriter(store, clock, SnapshotOptions{}).Write(*capture, request);
  EXPECT_TRUE(written.ok()) << written.status().ToString();
  if (!written.ok()) return {};
  if (result) *result = *written;
  return PartRecord{rank, step, written->seq, request.instance, written->bytes,
                    written->stored_bytes};
}

}  // namespace sg::testing
