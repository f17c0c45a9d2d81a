// The ledger (docs/operations.md, "The ledger"): a job's events grouped into
// attempts, one attempt per run of the agent on an instance, with the moments
// that goodput is computed from (agent/ledger/goodput.h). Built from the events the
// agent already writes (agent/ledger/events.h); the store holds nothing else.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/object_store.h"
#include "common/status.h"

namespace sg {

using LedgerMs = int64_t;  // milliseconds since the Unix epoch, UTC

struct LedgerCommit {
  LedgerMs time = 0;             // the commit
  LedgerMs checkpoint_time = 0;  // when the trainer wrote it (the commit's time when unknown)
  std::optional<int64_t> step;
  uint64_t new_bytes = 0, reused_bytes = 0;
};

struct LedgerAnswer {
  LedgerMs time = 0;
  bool answered = false;  // a new checkpoint came; false: the wait ran out
};

// A change of the checkpoint interval (checkpoint_cadence auto; a `cadence`
// event): the interval and what it was computed from.
struct LedgerCadence {
  LedgerMs time = 0;
  double interval_seconds = 0, cost_seconds = 0, mtbf_seconds = 0, rate_factor = 1;
  std::string why;
};

// One round of a group member's attempt: from its `group-joined` to its
// `round-end` (none for the round the attempt ends in).
struct LedgerRound {
  LedgerMs join = 0;
  std::optional<LedgerMs> restore_start, restore_end, trainer_start, end;
};

struct LedgerAttempt {
  std::string id;    // the events' attempt_id (the instance, for older agents)
  std::string node;  // the lane: the rank in a group, the engine index, else "0"
  std::string instance;
  std::string instance_type, availability_zone, lifecycle;
  // The prices the agent read at start ("prices" event), USD per hour;
  // nullopt when not read (docs/operations.md, "Cost").
  std::optional<double> spot_price, on_demand_price;
  std::optional<LedgerMs> launch, agent_start, lease, restore_start, restore_end;
  std::vector<LedgerMs> trainer_starts;
  std::optional<LedgerMs> trainer_exit;  // the trainer finished by itself
  std::vector<LedgerCommit> commits;
  std::vector<LedgerMs> requests;
  std::vector<LedgerCadence> cadence;  // the interval's changes, oldest first
  std::vector<LedgerRound> rounds;     // a group member's, in order; empty for one node
  std::vector<LedgerAnswer> answers;
  std::optional<LedgerMs> notice, trainer_stop, exit;
  std::optional<int> exit_code;
  std::string exit_reason;  // "notice", "signal", "complete", ...; "" without an exit event
  LedgerMs first = 0, last = 0;  // its first and last event
};

struct Ledger {
  std::vector<LedgerAttempt> attempts;  // by node, then by first event
};

// "2026-11-22T08:22:00.123Z" to milliseconds; nullopt when not such a time.
std::optional<LedgerMs> ParseLedgerTime(const std::string& text);
std::string FormatLedgerTime(LedgerMs ms);

// Groups `events` (any order) into attempts. Events without a parseable
// "time" are skipped; events without "attempt_id" (older agents) are grouped
// by instance.
Ledger BuildLedger(const std::vector<nlohmann::json>& events);

// Every event of `job` in the store, oldest first.
StatusOr<std::vector<nlohmann::json>> ReadJobEvents(ObjectStore& store, const std::string& job);

}  // namespace sg
