// `spotguard run`: the composition root of the agent. It builds the AWS
// parts once (common/aws_environment.h), opens the store, learns the
// instance's id and hands it all to RunAgent (agent/run/daemon.h).
#include <unistd.h>

#include "agent/run/attempt_record.h"
#include "agent/run/daemon.h"
#include "agent/config/exit_codes.h"
#include "agent/group/group_agent.h"
#include "agent/repo/open_store.h"
#include "common/aws_environment.h"
#include "common/log.h"
#include "common/log_queue.h"

namespace sg {

int RunAgentCommand(const Config& config, const std::map<std::string, std::string>& env) {
  // Built once: the store, the interruption monitor and the Auto Scaling
  // client share one transport, one IMDS client and one credentials chain.
  std::shared_ptr<AwsEnvironment> aws = OpenAws(config, env);
  auto store = OpenStore(config, env, aws);
  if (!store.ok()) {
    LogError("opening the store {}: {}", config.store, store.status().message());
    return kExitFailure;
  }
  // The lease's own handle on the same store: its calls give up within a
  // heartbeat (StoreUse::kLease, docs/design.md §9).
  auto lease_store = OpenStore(config, env, aws, StoreUse::kLease);
  if (!lease_store.ok()) {
    LogError("opening the store {}: {}", config.store, lease_store.status().message());
    return kExitFailure;
  }
  ImdsClient* imds = aws->imds();  // null when AWS_EC2_METADATA_DISABLED=true
  std::string instance;
  std::optional<InstanceIdentity> known;
  std::string launch_time;
  if (imds) {
    auto identity = ReadInstanceIdentity(*imds);
    if (identity.ok()) {
      instance = identity->instance_id;
      known = *identity;
      launch_time = ReadLaunchTime(*imds);
    } else {
      // Not yet an alarm: a service that answers a moment late is watched
      // all the same, and the monitor says so if it keeps failing
      // (InterruptionMonitor::Options::unseeable_after).
      LogWarn(
          "the instance metadata service did not answer at start ({}); using the host name as "
          "the instance id and watching it for interruption notices all the same",
          identity.status().message());
    }
  }
  if (instance.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    instance = host;
  }
  SystemdNotifier notifier(env);
  AgentContext context{config, env, **store, SystemClock(), imds, notifier, instance, aws.get()};
  context.lease_store = lease_store->get();
  context.identity = known;
  context.launch_time = launch_time;
  // A job of several nodes runs the round protocol (docs/multi-node.md).
  const AgentResult result = config.nodes > 1 ? RunGroupAgent(context) : RunAgent(context);
  // Threads stuck on the store still use the store, the transport and the
  // agent: end the process here, before any of them is destroyed, once the
  // lines queued for stderr are out (or stderr is stuck: common/log_queue.h).
  if (result.abandoned) {
    FlushStderr();
    ::_exit(result.exit_code);
  }
  return result.exit_code;
}

}  // namespace sg
