// The Auto Scaling side of a job's end (docs/design.md §9): what `on_complete`
// asks for once the job is complete, and the lifecycle hook's CONTINUE once
// the trainer is stopped on a notice.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "agent/config/config.h"
#include "agent/ledger/events.h"
#include "common/autoscaling_client.h"
#include "common/clock.h"
#include "common/object_store.h"

namespace sg {

struct JobEndContext {
  const Config& config;
  const std::map<std::string, std::string>& env;  // for `shutdown`
  AutoScalingApi& autoscaling;
  EventLog& events;
  std::string instance;
};

// on_complete: mark (nothing more), scale-to-zero (the instance's group to
// min 0 and desired 0) or shutdown (`shutdown -h now`). Failures are logged.
void PerformOnComplete(const JobEndContext& c);

// Writes <job>/complete (create-only: a marker already there stays) naming
// the last snapshot, and records the `complete` event.
void WriteCompleteMarker(ObjectStore& store, Clock& clock, EventLog& events, const std::string& job,
                         const std::string& instance, std::optional<uint64_t> seq,
                         std::optional<int64_t> step);

// CompleteLifecycleAction(CONTINUE) for `lifecycle_hook`, when configured.
void CompleteLifecycleHook(const JobEndContext& c);

}  // namespace sg
