// The fixture of the fleet tests (docs/design.md §2 and §11, docs/agent.md
// "Running under AWS Batch, Kubernetes or ECS"): the real binary as PID 1 of
// its own PID namespace (`unshare --pid --fork --mount-proc`), as a
// container's entrypoint runs, against the Ceph gateway and the IMDS
// simulator.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/ledger/events.h"
#include "agent/repo/manifest.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/store_layout.h"
#include "common/files.h"
#include "common/s3_store.h"
#include "common/strings.h"
#include "tests/e2e/e2e_base.h"
#include "tests/support/agent_process.h"
#include "tests/support/s3_test_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

namespace sg::testing {

using namespace std::chrono_literals;

class FleetE2E : public E2EBase {
 protected:
  void SetUp() override { UseS3("fleet-tests"); }

  // A config for `command`, job `job` (may hold {index}).
  std::string WriteConfig(const std::string& name, const std::string& job,
                          const nlohmann::json& command,
                          nlohmann::json overrides = nlohmann::json::object()) {
    nlohmann::json c = BaseConfig();
    c["job"] = job;
    c["preset"] = "generic";
    c["patterns"] = {"step_*.ckpt"};
    c["stop_grace"] = "10s";
    c["command"] = command;
    c["resume_args"] = {"--resume", "{resume}"};
    return WriteJobConfig(name, c, overrides);
  }

  // `spotguard run` as PID 1 of a new PID namespace.
  std::unique_ptr<AgentProcess> StartInNamespace(const std::string& name, const std::string& config,
                                                 const std::string& ckpt,
                                                 const std::string& imds_endpoint,
                                                 std::map<std::string, std::string> env = {}) {
    env = AgentEnv(env);
    for (const char* var :
         {"AWS_BATCH_JOB_ARRAY_INDEX", "JOB_COMPLETION_INDEX", "AWS_BATCH_JOB_ATTEMPT"}) {
      if (!env.count(var)) env[var] = "";  // only what the test gives
    }
    return std::make_unique<AgentProcess>(
        std::vector<std::string>{"run", "-c", config, "--checkpoint-dir", dir_.Join(ckpt),
                                 "--imds-endpoint", imds_endpoint},
        env, dir_.Join(name + ".log"), AsPid1());
  }

  // The agent's pid as this test sees it: the only child of `unshare`.
  static pid_t AgentPid(const AgentProcess& wrapper) {
    const std::string path = "/proc/" + std::to_string(wrapper.pid()) + "/task/" +
                             std::to_string(wrapper.pid()) + "/children";
    for (int i = 0; i < 500; ++i) {
      auto text = ReadFileToString(path);
      if (text.ok() && !Trim(*text).empty()) return std::stoi(*text);
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }

  std::vector<uint64_t> Committed(const std::string& job) {
    auto c = SnapshotCatalog(*store_, job).Committed();
    return c.ok() ? *c : std::vector<uint64_t>{};
  }
  Manifest ManifestOf(const std::string& job, uint64_t seq) {
    return *SnapshotCatalog(*store_, job).ReadManifest(seq);
  }
  // The newest committed step of `job`, -1 without one.
  int64_t NewestCommittedStep(const std::string& job) {
    std::vector<uint64_t> seqs = Committed(job);
    if (seqs.empty()) return -1;
    return ManifestOf(job, seqs.front()).step.value_or(-1);
  }
  std::vector<nlohmann::json> Events(const std::string& job) {
    EventLog log(*store_, SystemClock(), job, "");
    auto recent = log.Recent(1000);
    EXPECT_TRUE(recent.ok()) << recent.status().ToString();
    return recent.ok() ? *recent : std::vector<nlohmann::json>{};
  }
};

}  // namespace sg::testing
