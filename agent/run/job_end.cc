#include "agent/run/job_end.h"

#include "agent/repo/repository.h"
#include "common/log.h"
#include "common/process.h"

namespace sg {
namespace {

StatusOr<std::string> MyGroup(const JobEndContext& c) {
  SG_ASSIGN_OR_RETURN(AutoScalingInstance me,
                      c.autoscaling.DescribeAutoScalingInstance(c.instance));
  return me.group_name;
}

template <typename T>
nlohmann::ordered_json OrNull(const std::optional<T>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

}  // namespace

void WriteCompleteMarker(ObjectStore& store, Clock& clock, EventLog& events, const std::string& job,
                         const std::string& instance, std::optional<uint64_t> seq,
                         std::optional<int64_t> step) {
  const nlohmann::ordered_json marker = {{"time", FormatUtc(clock.Now(), true)},
                                         {"instance", instance},
                                         {"seq", OrNull(seq)},
                                         {"step", OrNull(step)}};
  Status put = Repository::Open(store, job).MarkComplete(marker.dump());
  if (!put.ok() && !put.Is(StatusCode::kPreconditionFailed)) {
    LogError("writing the complete marker failed: {}", put.message());
  }
  events.Note("complete", marker);
  LogInfo("job {} is complete", job);
}

void PerformOnComplete(const JobEndContext& c) {
  switch (c.config.on_complete) {
    case OnComplete::kMark:
      return;
    case OnComplete::kScaleToZero: {
      auto group = MyGroup(c);
      Status st = group.ok() ? c.autoscaling.UpdateAutoScalingGroup(
                                   *group, GroupCapacity{.min_size = 0, .desired_capacity = 0})
                             : group.status();
      if (st.ok()) {
        LogInfo("scaled Auto Scaling group {} to zero: the job is done", *group);
        c.events.Note("scale-to-zero", {{"group", *group}});
      } else {
        LogError("scaling the Auto Scaling group to zero failed: {}", st.message());
      }
      return;
    }
    case OnComplete::kShutdown: {
      LogInfo("the job is done; shutting the instance down");
      SpawnOptions spawn;
      spawn.argv = {"shutdown", "-h", "now"};
      spawn.env = c.env;
      auto child = ChildProcess::Spawn(spawn);
      if (child.ok()) {
        auto ended = child->Wait(std::chrono::milliseconds(30'000));
        if (ended.ok() && ended->has_value() && (*ended)->success()) return;
      }
      LogError("shutdown -h now failed");
      return;
    }
  }
}

void CompleteLifecycleHook(const JobEndContext& c) {
  if (!c.config.lifecycle_hook) return;
  const std::string& hook = *c.config.lifecycle_hook;
  auto group = MyGroup(c);
  Status st = group.ok() ? c.autoscaling.CompleteLifecycleAction(*group, hook, c.instance,
                                                                 LifecycleActionResult::kContinue)
                         : group.status();
  if (st.ok()) {
    LogInfo("completed lifecycle action {} of group {} (CONTINUE)", hook, *group);
    c.events.Note("lifecycle-complete", {{"group", *group}, {"hook", hook}});
  } else {
    LogError("completing the lifecycle action failed: {}", st.message());
  }
}

}  // namespace sg
