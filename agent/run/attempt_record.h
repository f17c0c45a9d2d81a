// What the agent adds to its events so the ledger (docs/operations.md,
// "The ledger") can account for an attempt: the instance it ran on and the
// moments the job policy does not see (agent start, lease, restore start,
// exit). Each is stamped when it happens and written on the store-work
// queue, never on the loop's thread.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "agent/ledger/events.h"
#include "agent/run/job_policy.h"
#include "agent/run/metrics_file.h"
#include "common/background_queue.h"
#include "common/clock.h"
#include "common/imds_client.h"

namespace sg {

// "instance_type", "availability_zone", "lifecycle", "launch_time" of the
// instance; empty strings when unknown (off EC2).
nlohmann::ordered_json AgentStartDetails(const std::optional<InstanceIdentity>& identity,
                                         const std::string& launch_time);

// The identity document's "pendingTime" (the instance's launch); "" when the
// service does not answer or the document has none.
std::string ReadLaunchTime(MetadataService& imds);

// "notice", "signal", "complete", "fenced", "failed", "none".
std::string_view JobEndName(JobEnd end);
// "lease", "restore", "training", "final_snapshot", "stopping", "done".
std::string_view JobPhaseName(JobPhase phase);

class AttemptRecorder {
 public:
  // `metrics` sees every event first (on the caller's thread).
  AttemptRecorder(EventLog& events, BackgroundQueue& queue, Clock& clock, MetricsFile& metrics)
      : events_(events), queue_(queue), clock_(clock), metrics_(metrics) {}

  // Records `kind` as happening `at` (default now); the write runs on the queue.
  void Record(std::string kind, nlohmann::ordered_json details = nlohmann::ordered_json::object(),
              std::optional<Clock::WallTime> at = std::nullopt);

 private:
  EventLog& events_;
  BackgroundQueue& queue_;
  Clock& clock_;
  MetricsFile& metrics_;
};

}  // namespace sg
