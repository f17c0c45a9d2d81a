// `spotguard status [--json]`: the job's state as the store holds it (docs/design.md
// §2): who holds the lease and how fresh its heartbeat is, the newest
// committed snapshot (the last upload), whether the job is complete, and the
// recent events with the interruptions among them. Reads only; works from
// any machine that can read the store.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/repo/lease.h"
#include "agent/repo/manifest.h"
#include "common/clock.h"
#include "common/object_store.h"

namespace sg {

// Event kinds that mean the instance was (or is about to be) taken away.
bool IsInterruptionKind(std::string_view kind);

struct JobCompletion {
  std::string time;
  std::string instance;
  std::optional<uint64_t> seq;
  std::optional<int64_t> step;
};

struct JobStatus {
  std::string job;
  std::string store;  // ObjectStore::Describe()
  std::optional<LeaseState> lease;
  uint64_t committed = 0;          // committed snapshots
  std::vector<uint64_t> suspect;   // marked suspect (agent/run/suspect.h), newest first
  // Damaged objects in quarantine (agent/repo/quarantine.h), relative to "<job>/".
  std::set<std::string> quarantined;
  std::optional<Manifest> newest;  // the newest one whose manifest reads back
  bool complete = false;
  std::optional<JobCompletion> completion;  // when complete and the marker reads back
  uint64_t event_count = 0;
  uint64_t interruption_count = 0;
  std::vector<nlohmann::json> recent_events;  // newest first
  std::vector<nlohmann::json> interruptions;  // newest first, at most 5
  // Objects that exist but do not read back (a damaged lease, manifest or
  // marker), each naming the object and what is wrong.
  std::vector<std::string> problems;
  // The engine's cap on attempts (fleet.max_attempts; 0: unknown), set by
  // the caller: the attempt near it is warned about (agent/run/retry_budget.h).
  int attempt_cap = 0;

  // Nothing of the job is in the store.
  bool empty() const;
};

// Reads the job's state. Errors are the store's (unreachable, denied);
// damaged objects are reported in `problems` instead.
StatusOr<JobStatus> ReadJobStatus(ObjectStore& store, const std::string& job,
                                  size_t recent_events = 10);

// One object for scripts; ages are seconds relative to `now`, and a lease
// whose heartbeat is older than `lease_timeout` is marked stale.
nlohmann::ordered_json JobStatusToJson(const JobStatus& status, Clock::WallTime now,
                                       Duration lease_timeout);
// The same for people.
std::string JobStatusToText(const JobStatus& status, Clock::WallTime now, Duration lease_timeout);

// "12s", "4m 05s", "3h 12m", "2d 4h"; negative ages (a clock ahead of ours) read "in the future".
std::string FormatAge(std::chrono::seconds age);

// Exit code: 0 (also for a job with nothing in the store), 1 when the store
// cannot be read.
int RunStatusCommand(const Config& config, const std::map<std::string, std::string>& env,
                     bool json);

}  // namespace sg
