// Goodput by cause (docs/operations.md, "Goodput"): a pure function of the
// ledger (agent/ledger/ledger.h). Every millisecond of every attempt, from its
// launch to its last event, and every gap between a node's attempts, goes
// to exactly one cause, so the causes of a node add up to its span.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/ledger/ledger.h"

namespace sg {

enum class Cause {
  kProductive,        // the trainer ran, and its work was kept
  kLostWork,          // the trainer ran, and its work was thrown away
  kRestore,           // the snapshot was restored
  kStartup,           // from the launch to the trainer's start, restore and lease excluded
  kWaiting,           // for the lease, or between one attempt's end and the next one's launch
  kCheckpointAnswer,  // from a checkpoint request to the trainer's answer
  kShutdown,          // from the answer (or the end of training) to the agent's exit
};
inline constexpr size_t kCauseCount = 7;
std::string_view CauseName(Cause cause);  // "productive", "lost_work", ...

using CauseMs = std::array<int64_t, kCauseCount>;

struct LedgerSegment {
  Cause cause;
  LedgerMs from = 0, to = 0;
};

struct AttemptGoodput {
  const LedgerAttempt* attempt = nullptr;  // into the ledger given
  LedgerMs begin = 0, end = 0;             // its span (the waiting before it excluded)
  std::vector<LedgerSegment> segments;     // in time order, from the gap before it to its end
  CauseMs ms{};
  bool interrupted = false;              // a notice, or it ended on one
  std::optional<int64_t> resumed_step;   // the newest step committed before it started
  std::optional<LedgerMs> kept_until;    // its work up to then was kept
};

struct CheckpointCost {
  int samples = 0;         // answered requests
  int commit_samples = 0;  // of them, answers committed before their attempt ended
  double mean_request_to_answer = 0, max_request_to_answer = 0;  // seconds
  double mean_answer_to_commit = 0, max_answer_to_commit = 0;    // seconds
};

struct Goodput {
  std::vector<AttemptGoodput> attempts;  // in the ledger's order
  CauseMs total{};
  LedgerMs first = 0, last = 0;  // the earliest begin, the latest end
  int64_t node_ms = 0;           // the nodes' spans added up (= the sum of `total`)
  int64_t instance_ms = 0;       // the attempts' spans added up
  int interruptions = 0;
  std::optional<int64_t> newest_step, first_step;
  double steps_per_productive_hour = 0;
  double interruptions_per_instance_day = 0;
  std::optional<double> mtbf_hours;  // instance-hours per interruption; none without one
  CheckpointCost checkpoint;
  std::optional<size_t> longest_loss;  // index of the attempt that lost the most work
};

// REQUIRES: `ledger` outlives the result (it points into it).
Goodput ComputeGoodput(const Ledger& ledger);

}  // namespace sg
