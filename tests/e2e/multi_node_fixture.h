// The fixture of the multi-node end-to-end tests (docs/multi-node.md):
// agents of the real binary, each with its own IMDS simulator (own instance
// id) and checkpoint dir, sharing the Ceph gateway; helpers that read the
// group's records and run the CLI.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent/repo/group_store.h"
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

class MultiNodeE2E : public ::testing::Test {
 protected:
  struct Node {
    std::unique_ptr<ImdsSimulator> imds;
    std::unique_ptr<AgentProcess> agent;
    std::string ckpt;
  };

  void SetUp() override {
    ASSERT_TRUE(LoadS3TestEnv(&s3_));
    prefix_ = "multi-node-tests/" + RandomHex(6);
    store_ = OpenTestS3Store(s3_, prefix_);
    ASSERT_NE(store_, nullptr);
  }

  // A job of `nodes` nodes whose trainer is `command`.
  std::string JobConfig(int nodes, const nlohmann::json& command, const std::string& preset) {
    nlohmann::json c = {{"job", "job"},
                        {"store", "s3://" + s3_.bucket + "/" + prefix_},
                        {"endpoint", s3_.endpoint},
                        {"preset", preset},
                        {"checkpoint_signal", "SIGUSR1"},
                        {"settle_time", "300ms"},
                        {"upload_interval", "1s"},
                        {"stop_grace", "5s"},
                        {"nodes", nodes},
                        // Timeouts of several heartbeats: a member is taken for gone
                        // (the round ends "stale") or the lease changes hands only when
                        // an agent's loop stalls for that long, which a loaded 2-core
                        // machine running three torch imports can come near at 5 s.
                        {"group", {{"address", "127.0.0.1"}, {"heartbeat", "1s"}, {"timeout", "10s"}}},
                        {"imds", {{"poll_interval", "200ms"}}},
                        {"restart", {{"max", 2}, {"backoff", "200ms"}, {"max_backoff", "1s"}}},
                        {"lease", {{"heartbeat", "1s"}, {"timeout", "6s"}}},
                        {"command", command}};
    if (group_port_) c["group"]["port"] = group_port_;
    return dir_.WriteFile("job-" + std::to_string(++configs_) + ".json", c.dump(2));
  }

  // A job of `nodes` nodes of tests/tools/group_trainer.py, `steps` of 0.2 s.
  std::string GroupTrainerConfig(int nodes, int steps, const std::vector<std::string>& extra_args) {
    nlohmann::json command = {SPOTGUARD_PYTHON,
                              std::string(SPOTGUARD_SOURCE_DIR) + "/tests/tools/group_trainer.py",
                              "--steps", std::to_string(steps), "--step-seconds", "0.2"};
    for (const std::string& a : extra_args) command.push_back(a);
    return JobConfig(nodes, command, "pytorch");
  }

  Node& StartNode(int n, const std::string& config,
                  const std::map<std::string, std::string>& extra_env = {}) {
    Node& node = nodes_[n];
    node.imds = std::make_unique<ImdsSimulator>();
    node.imds->Control("POST", "/_sim/identity",
                       R"({"instanceId": "i-node)" + std::to_string(n) + R"("})");
    node.ckpt = dir_.Join("node" + std::to_string(n) + "/ckpt");
    std::filesystem::create_directories(node.ckpt);
    std::map<std::string, std::string> env = {{"AWS_ACCESS_KEY_ID", s3_.access_key},
                                              {"AWS_SECRET_ACCESS_KEY", s3_.secret_key},
                                              {"SPOTGUARD_CONFIG", ""},
                                              {"SPOTGUARD_LOG_LEVEL", "debug"}};
    for (const auto& [k, v] : extra_env) env[k] = v;
    node.agent = std::make_unique<AgentProcess>(
        std::vector<std::string>{"run", "-c", config, "--checkpoint-dir", node.ckpt,
                                 "--imds-endpoint", node.imds->endpoint()},
        env, dir_.Join("node" + std::to_string(n) + ".log"));
    return node;
  }

  std::vector<GroupCommit> Groups() {
    auto g = GroupStore(*store_, "job").Groups();
    return g.ok() ? *g : std::vector<GroupCommit>{};
  }
  std::vector<RoundEnd> Ends(uint64_t round) {
    auto e = GroupStore(*store_, "job").Ends(round);
    return e.ok() ? *e : std::vector<RoundEnd>{};
  }
  // Whether every round whose plan names `instance` has ended: no node is
  // left in a round with it (what must hold once it is lost, whichever
  // state the group was in when it was).
  bool RoundsWithEnded(const std::string& instance) {
    auto listed = ListAll(*store_, "job/group/rounds/");
    if (!listed.ok()) return false;
    for (const ObjectInfo& o : *listed) {
      if (!o.key.ends_with("/plan.json")) continue;
      auto body = static_cast<ObjectStore&>(*store_).Get(o.key);
      if (!body.ok()) continue;  // retention took the round meanwhile
      auto plan = ParsePlan(*body, o.key);
      if (!plan.ok()) continue;
      const bool with = std::any_of(plan->members.begin(), plan->members.end(),
                                    [&](const PlanMember& m) { return m.instance == instance; });
      if (with && Ends(plan->round).empty()) return false;
    }
    return true;
  }
  bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
    return WaitUntil(done, timeout);
  }
  // The final.txt lines of the nodes `which`, sorted.
  std::vector<std::string> Finals(const std::vector<int>& which) {
    std::vector<std::string> out;
    for (int n : which) {
      auto text = ReadFileToString(nodes_[n].ckpt + "/final.txt");
      out.push_back(text.ok() ? std::string(Trim(*text)) : "(no final.txt on node " +
                                                               std::to_string(n) + ")");
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  // A spotguard command against the store, as a person runs it.
  std::pair<int, std::string> Cli(std::vector<std::string> args) {
    static int runs = 0;
    std::map<std::string, std::string> env = {{"AWS_ACCESS_KEY_ID", s3_.access_key},
                                              {"AWS_SECRET_ACCESS_KEY", s3_.secret_key},
                                              {"SPOTGUARD_CONFIG", ""}};
    AgentProcess p(args, env, dir_.Join("cli-" + std::to_string(++runs) + ".log"));
    auto code = p.Wait(180s);  // a bound for a loaded machine, no verdict
    return {code.value_or(-1), p.Output()};
  }

  std::string Logs() {
    std::string out;
    for (auto& [n, node] : nodes_) {
      if (node.agent) out += "--- node " + std::to_string(n) + "\n" + node.agent->Output();
    }
    return out;
  }

  S3TestEnv s3_;
  std::string prefix_;
  std::unique_ptr<S3Store> store_;
  TempDir dir_;
  std::map<int, Node> nodes_;
  int configs_ = 0;
  int group_port_ = 0;  // group.port when set
};

}  // namespace sg::testing
