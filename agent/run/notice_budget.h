// How long the agent may wait for the trainer's checkpoint after an
// interruption notice (docs/design.md §10): what is left to the deadline,
// minus the time the upload is expected to take at the measured rate, minus
// a safety margin for committing and stopping. A pure function, so the
// decision is tested without a clock, a store or a trainer.
#pragma once

#include <chrono>
#include <cstdint>

namespace sg {

// A spot notice is posted this long before the deadline it names.
inline constexpr std::chrono::milliseconds kNoticeLead{120'000};
// Time kept in hand before a notice's deadline for committing and stopping.
inline constexpr std::chrono::milliseconds kNoticeSafety{15'000};
// An upload (one node's final snapshot, a group's round) still running this
// long before a deadline is given up on, so the trainer still gets its stop
// signal in time (docs/agent.md, "How it ends"; docs/multi-node.md).
inline constexpr std::chrono::milliseconds kGiveUpBeforeStop{10'000};
// What a group's node waits for the group's answer after a notice elsewhere
// (or its own notice that names no time), when stop_timeout is longer: a
// spot notice gives two minutes.
inline constexpr std::chrono::milliseconds kGroupEndBudget{100'000};
// Assumed upload rate until one has been measured.
inline constexpr double kDefaultUploadBytesPerSecond = 50.0 * (1 << 20);

struct NoticeBudget {
  std::chrono::milliseconds upload_estimate{0};  // expected_bytes at the upload rate
  std::chrono::milliseconds wait{0};             // for a fresh checkpoint; never negative
};

// `left`: time to the notice's deadline (negative when it has passed);
// `expected_bytes`: the size of the checkpoint to upload; `bytes_per_second`:
// the measured upload rate (a rate <= 0 counts as the default).
NoticeBudget ComputeNoticeBudget(std::chrono::milliseconds left, uint64_t expected_bytes,
                                 double bytes_per_second);

}  // namespace sg
