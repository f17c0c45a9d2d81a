// `spotguard run`: the agent (docs/design.md §9). One loop supervises the trainer,
// uploads the newest complete checkpoint at most every upload_interval,
// watches the metadata service for notices, keeps the lease, and ends the
// job: on a notice with a fresh snapshot and exit 75, on completion with the
// `complete` marker and exit 0, when fenced with exit 4, after too many
// crashes with exit 1, on SIGTERM/SIGINT/SIGQUIT with a last snapshot and
// exit 75 (74 when it could not be committed), and before the trainer starts
// (a stop during the restore at start cancels it) with exit 75.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "agent/config/config.h"
#include "agent/trainer/job_ports.h"
#include "common/clock.h"
#include "common/imds_client.h"
#include "common/object_store.h"
#include "common/sd_notify.h"

namespace sg {

class AwsEnvironment;

struct AgentContext {
  const Config& config;
  const std::map<std::string, std::string>& env;  // the agent's environment
  ObjectStore& store;
  Clock& clock;
  MetadataService* imds = nullptr;  // null: no metadata service (IMDS disabled)
  const SystemdNotifier& notifier;
  std::string instance;  // instance id (or host name off EC2)
  // The command's AWS parts, for the Auto Scaling calls at the job's end;
  // null: no Auto Scaling calls can be made (as in a drill).
  AwsEnvironment* aws = nullptr;
  // The loop's seams (agent/trainer/job_ports.h); the real parts where none is given.
  AgentPorts ports = {};
  // The lease's reads and writes go here, with deadlines that fit its
  // heartbeat (StoreUse::kLease); null: `store`.
  ObjectStore* lease_store = nullptr;
  // What the metadata service said of this instance; nullopt off EC2.
  std::optional<InstanceIdentity> identity = std::nullopt;
  std::string launch_time = {};  // the identity document's pendingTime; "" when unknown
};

struct AgentResult {
  int exit_code = 0;
  // Filled when the job was interrupted: seconds from the notice to the commit.
  double notice_to_commit_seconds = -1;
  std::optional<int64_t> committed_step;  // step of the last snapshot committed
  std::optional<int64_t> local_step;      // newest step on disk when the trainer stopped
  std::optional<int64_t> resumed_step;    // step the trainer was started from
  double restore_seconds = 0;
  // Work on the store was still hanging at the exit and was left running:
  // the caller must end the process without waiting for it (no destructor
  // may run under it).
  bool abandoned = false;
};

// Runs the job to its end. Returns the exit code of docs/design.md §2 and what
// happened (for `drill`).
AgentResult RunAgent(const AgentContext& context);

// `spotguard run`: builds the context from the config and environment.
int RunAgentCommand(const Config& config, const std::map<std::string, std::string>& env);

// "<parent of checkpoint_dir>/.spotguard-notice-<job>.json": where the notice
// JSON appears for the trainer (SPOTGUARD_NOTICE_FILE).
std::string NoticeFilePath(const Config& config);

}  // namespace sg
