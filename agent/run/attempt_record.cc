#include "agent/run/attempt_record.h"

namespace sg {

nlohmann::ordered_json AgentStartDetails(const std::optional<InstanceIdentity>& identity,
                                         const std::string& launch_time) {
  nlohmann::ordered_json d = nlohmann::ordered_json::object();
  d["instance_type"] = identity ? identity->instance_type : "";
  d["availability_zone"] = identity ? identity->availability_zone : "";
  d["region"] = identity ? identity->region : "";
  d["lifecycle"] = identity ? identity->life_cycle : "";
  d["launch_time"] = launch_time;
  return d;
}

std::string ReadLaunchTime(MetadataService& imds) {
  auto body = imds.Get("dynamic/instance-identity/document");
  if (!body.ok()) return "";
  const auto doc = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return "";
  auto it = doc.find("pendingTime");
  return it != doc.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string_view JobEndName(JobEnd end) {
  switch (end) {
    case JobEnd::kNotice:
      return "notice";
    case JobEnd::kSignal:
      return "signal";
    case JobEnd::kComplete:
      return "complete";
    case JobEnd::kFenced:
      return "fenced";
    case JobEnd::kFailed:
      return "failed";
    case JobEnd::kNone:
      break;
  }
  return "none";
}

std::string_view JobPhaseName(JobPhase phase) {
  switch (phase) {
    case JobPhase::kLease:
      return "lease";
    case JobPhase::kRestore:
      return "restore";
    case JobPhase::kTraining:
      return "training";
    case JobPhase::kFinalSnapshot:
      return "final_snapshot";
    case JobPhase::kStopping:
      return "stopping";
    case JobPhase::kDone:
      break;
  }
  return "done";
}

void AttemptRecorder::Record(std::string kind, nlohmann::ordered_json details,
                             std::optional<Clock::WallTime> at) {
  const Clock::WallTime when = at.value_or(clock_.Now());
  metrics_.Observe(kind, details, when);
  queue_.Post([this, kind = std::move(kind), details = std::move(details), when] {
    events_.Note(kind, details, when);
  });
}

}  // namespace sg
