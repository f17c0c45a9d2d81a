// The job's event history (docs/design.md §4): <job>/events/<utc-time>-<kind>.json,
// one small object per event (start, restore, notice, snapshot, stop,
// complete, failed, fenced), read back by `spotguard status`.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/object_store.h"

namespace sg {

class EventLog {
 public:
  // `attempt_id` names this run of the agent on this instance (the
  // ledger's attempt, docs/operations.md); "" makes a fresh one.
  EventLog(ObjectStore& store, Clock& clock, std::string job, std::string instance,
           std::string attempt_id = "");

  // The engine's child index and attempt (agent/config/engine_identity.h), added
  // to every event from now on as "index" and "attempt" when set.
  void SetEngineIdentity(std::optional<int64_t> index, std::optional<int64_t> attempt) {
    index_ = index;
    attempt_ = attempt;
  }

  // The node's rank in a group: added to every event from now on as "node".
  void SetNode(int64_t rank) { node_ = rank; }
  const std::string& attempt_id() const { return attempt_id_; }

  // Stores {"kind", "time", "instance", "attempt_id", ...details}, create-only: when the
  // millisecond's key is taken (another instance, same kind), the event moves
  // to the next millisecond. A failure is logged and returned; callers go on,
  // since events are history, not state. `at`: when it happened (an event
  // written later, off the notice path, keeps its own time); default now.
  Status Record(std::string_view kind, nlohmann::ordered_json details = {},
                std::optional<Clock::WallTime> at = std::nullopt);
  // Record for callers that go on whatever happens: its failure is logged only.
  void Note(std::string_view kind, nlohmann::ordered_json details = {},
            std::optional<Clock::WallTime> at = std::nullopt) {
    [[maybe_unused]] const Status logged = Record(kind, std::move(details), at);
  }

  // The newest `limit` events, newest first.
  StatusOr<std::vector<nlohmann::json>> Recent(size_t limit);

 private:
  Status Put(std::string_view kind, const nlohmann::ordered_json& details, Clock::WallTime now);

  ObjectStore& store_;
  Clock& clock_;
  const std::string job_, instance_, attempt_id_;
  std::optional<int64_t> index_, attempt_, node_;
};

}  // namespace sg
