// The fixture of the end-to-end tests that run `spotguard run` with real
// trainers, real signals and a file:// store; no metadata service (the
// instance is the host name, the same for every agent).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "agent/repo/lease.h"
#include "common/file_store.h"
#include "common/files.h"
#include "common/proc_stat.h"
#include "tests/e2e/e2e_base.h"
#include "tests/support/agent_process.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {

using namespace std::chrono_literals;

// Whether `pid` is a process that is not a zombie (a killed orphan may stay a
// zombie when PID 1 of a container does not reap).
inline bool Alive(pid_t pid) {
  auto st = ReadProcStat(pid);
  return st.ok() && st->state != 'Z';
}

inline bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return done();
}

inline pid_t TrainerPid(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(R"(started the trainer \(pid (\d+))"))) return -1;
  return std::stoi(m[1]);
}

inline std::string Contents(const std::string& path) {
  auto text = ReadFileToString(path);
  return text.ok() ? *text : "";
}

inline pid_t ReadPidFile(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok() || text->empty()) return -1;
  return std::stoi(*text);
}

class FileStoreAgentTest : public E2EBase {
 protected:
  void SetUp() override { UseFileStore(); }
  void TearDown() override {
    for (pid_t group : groups_to_kill_) ::kill(-group, SIGKILL);
  }

  // `overrides` replace keys of the config.
  std::string WriteConfig(const std::string& name, const std::vector<std::string>& command,
                          const nlohmann::json& overrides = nlohmann::json::object()) {
    nlohmann::json c = BaseConfig();
    c.erase("checkpoint_signal");
    c["preset"] = "generic";
    c["patterns"] = {"*.bin"};
    c["stop_grace"] = "2s";
    c["restart"] = {{"max", 0}};
    c["command"] = command;
    return WriteJobConfig(name, c, overrides);
  }

  std::unique_ptr<AgentProcess> StartAgent(const std::string& name, const std::string& config,
                                           const std::string& ckpt) {
    return std::make_unique<AgentProcess>(
        std::vector<std::string>{"run", "-c", config, "--checkpoint-dir", ckpt},
        AgentEnv({{"AWS_EC2_METADATA_DISABLED", "true"}}), dir_.Join(name + ".log"));
  }

  // The lease object as the store holds it; NotFound when never created.
  StatusOr<LeaseState> Lease() {
    auto body = static_cast<ObjectStore&>(*store_).Get("job/lease");
    if (!body.ok()) return body.status();
    return LeaseKeeper::Parse(*body);
  }

  std::vector<pid_t> groups_to_kill_;  // whatever a failing test leaves behind
};

}  // namespace sg::testing
