// The fixture of the `spotguard run` end-to-end tests: the real binary, the
// example trainer as a real child process, the Ceph gateway as the store and
// the IMDS simulator as the instance's metadata service.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "agent/ledger/events.h"
#include "agent/repo/manifest.h"
#include "agent/repo/restorer.h"
#include "common/files.h"
#include "common/s3_store.h"
#include "tests/e2e/e2e_base.h"
#include "tests/support/agent_process.h"
#include "tests/support/s3_test_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

namespace sg::testing {

using namespace std::chrono_literals;

class AgentE2E : public E2EBase {
 protected:
  void SetUp() override {
    UseS3("agent-tests");
    ASSERT_FALSE(imds_.endpoint().empty());
  }

  // A config for the example trainer; `trainer_args` are appended to its command.
  std::string WriteConfig(const std::string& name, const std::vector<std::string>& trainer_args,
                          nlohmann::json overrides = nlohmann::json::object()) {
    nlohmann::json command = {SPOTGUARD_PYTHON,
                              SPOTGUARD_SOURCE_DIR "/examples/simple_trainer.py",
                              "--out",
                              "{checkpoint_dir}",
                              "--step-seconds",
                              "0.02",
                              "--checkpoint-every",
                              "20"};
    for (const auto& a : trainer_args) command.push_back(a);
    nlohmann::json c = BaseConfig();
    c["preset"] = "generic";
    c["patterns"] = {"step_*.ckpt"};
    c["stop_grace"] = "5s";
    c["restart"] = {{"max", 2}, {"backoff", "200ms"}, {"max_backoff", "1s"}};
    c["command"] = command;
    c["resume_args"] = {"--resume", "{resume}"};
    return WriteJobConfig(name, c, overrides);
  }

  std::unique_ptr<AgentProcess> StartAgent(const std::string& name, const std::string& config,
                                           const std::string& ckpt, const ImdsSimulator& imds,
                                           std::map<std::string, std::string> env = {}) {
    return std::make_unique<AgentProcess>(
        std::vector<std::string>{"run", "-c", config, "--checkpoint-dir", dir_.Join(ckpt),
                                 "--imds-endpoint", imds.endpoint()},
        AgentEnv(env), dir_.Join(name + ".log"));
  }

  std::vector<uint64_t> Committed() {
    auto c = SnapshotCatalog(*store_, "job").Committed();
    return c.ok() ? *c : std::vector<uint64_t>{};
  }
  Manifest ManifestOf(uint64_t seq) { return *SnapshotCatalog(*store_, "job").ReadManifest(seq); }
  std::vector<std::string> EventKinds() {
    EventLog log(*store_, SystemClock(), "job", "");
    std::vector<std::string> kinds;
    auto recent = log.Recent(100);
    EXPECT_TRUE(recent.ok()) << recent.status().ToString();
    if (!recent.ok()) return kinds;
    for (const auto& e : *recent) kinds.insert(kinds.begin(), e["kind"].get<std::string>());
    return kinds;
  }
  static int64_t NewestStepOnDisk(const std::string& dir) {
    int64_t best = -1;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      std::smatch m;
      const std::string name = e.path().filename().string();
      if (std::regex_match(name, m, std::regex(R"(step_(\d+)\.ckpt)"))) {
        best = std::max<int64_t>(best, std::stoll(m[1]));
      }
    }
    return best;
  }

  ImdsSimulator imds_;
};

}  // namespace sg::testing
