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
#include "tests/support/agent_process.h"
#include "tests/support/s3_test_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

namespace sg::testing {

using namespace std::chrono_literals;

class FleetE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(LoadS3TestEnv(&s3_));
    prefix_ = "fleet-tests/" + RandomHex(6);
    store_ = OpenTestS3Store(s3_, prefix_);
    ASSERT_NE(store_, nullptr);
  }

  // The wrapper that makes the agent PID 1 of a new PID namespace; it dies
  // with the test (--kill-child). Without root, a user namespace maps it.
  static std::vector<std::string> Namespace() {
    std::vector<std::string> w = {"unshare", "--pid", "--fork", "--mount-proc", "--kill-child"};
    if (::geteuid() != 0) w.insert(w.begin() + 1, {"--user", "--map-root-user"});
    return w;
  }

  // A config for `command`, job `job` (may hold {index}).
  std::string WriteConfig(const std::string& name, const std::string& job,
                          const nlohmann::json& command,
                          nlohmann::json overrides = nlohmann::json::object()) {
    nlohmann::json c = {{"job", job},
                        {"store", "s3://" + s3_.bucket + "/" + prefix_},
                        {"endpoint", s3_.endpoint},
                        {"preset", "generic"},
                        {"patterns", {"step_*.ckpt"}},
                        {"checkpoint_signal", "SIGUSR1"},
                        {"settle_time", "300ms"},
                        {"upload_interval", "1s"},
                        {"stop_grace", "10s"},
                        {"imds", {{"poll_interval", "200ms"}}},
                        {"lease", {{"heartbeat", "1s"}, {"timeout", "3s"}}},
                        {"command", command},
                        {"resume_args", {"--resume", "{resume}"}}};
    for (auto& [k, v] : overrides.items()) c[k] = v;
    return dir_.WriteFile(name + ".json", c.dump(2));
  }

  // `spotguard run` as PID 1 of a new PID namespace.
  std::unique_ptr<AgentProcess> StartInNamespace(const std::string& name, const std::string& config,
                                                 const std::string& ckpt,
                                                 const std::string& imds_endpoint,
                                                 std::map<std::string, std::string> env = {}) {
    env["AWS_ACCESS_KEY_ID"] = s3_.access_key;
    env["AWS_SECRET_ACCESS_KEY"] = s3_.secret_key;
    env["SPOTGUARD_CONFIG"] = "";
    env["SPOTGUARD_LOG_LEVEL"] = "debug";
    for (const char* var :
         {"AWS_BATCH_JOB_ARRAY_INDEX", "JOB_COMPLETION_INDEX", "AWS_BATCH_JOB_ATTEMPT"}) {
      if (!env.count(var)) env[var] = "";  // only what the test gives
    }
    return std::make_unique<AgentProcess>(
        std::vector<std::string>{"run", "-c", config, "--checkpoint-dir", dir_.Join(ckpt),
                                 "--imds-endpoint", imds_endpoint},
        env, dir_.Join(name + ".log"), Namespace());
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
  bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
    return WaitUntil(done, timeout);
  }

  S3TestEnv s3_;
  std::string prefix_;
  std::unique_ptr<S3Store> store_;
  TempDir dir_;
};

}  // namespace sg::testing
