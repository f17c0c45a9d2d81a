// What the multi-node end-to-end fixtures share (docs/testing.md,
// "End-to-end fixtures"): agents of the real binary started as nodes, each
// with its own IMDS simulator (own instance id) and checkpoint dir, on the
// test's store; the group's records as the store holds them; every node's
// log for a failure's message.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/repo/group_store.h"
#include "tests/e2e/e2e_base.h"
#include "tests/support/agent_process.h"
#include "tests/support/subprocess.h"

namespace sg::testing {

class GroupE2EBase : public E2EBase {
 protected:
  struct Node {
    std::unique_ptr<ImdsSimulator> imds;
    std::unique_ptr<AgentProcess> agent;
    std::string ckpt;
  };
  struct NodeOptions {
    std::map<std::string, std::string> env;  // on top of AgentEnv()
    bool pid1 = false;        // PID 1 of a PID namespace of its own (AsPid1)
    bool create_ckpt = true;  // false: the checkpoint dir does not exist yet
  };

  // BaseConfig() for a job of `nodes` nodes: a 5 s stop grace, a lease that
  // times out after 6 s and, for more than one node, the group on loopback
  // with 1 s heartbeats. Its timeout is 10 s: a member is taken for gone
  // (the round ends "stale") only when an agent's loop stalls that long,
  // which a loaded 2-core machine running three torch imports can come
  // near at 5 s.
  nlohmann::json GroupJobConfig(int nodes, const nlohmann::json& command) const {
    nlohmann::json c = BaseConfig();
    c["stop_grace"] = "5s";
    c["nodes"] = nodes;
    c["lease"]["timeout"] = "6s";
    if (nodes > 1) c["group"] = {{"address", "127.0.0.1"}, {"heartbeat", "1s"}, {"timeout", "10s"}};
    c["command"] = command;
    return c;
  }
  // Writes a config as job-<n>.json; its path.
  std::string WriteNumberedConfig(const nlohmann::json& c,
                                  const nlohmann::json& overrides = nlohmann::json::object()) {
    return WriteJobConfig("job-" + std::to_string(++configs_), c, overrides);
  }

  // `spotguard run` of node `n` (instance "i-node<n>") with `config`.
  Node& StartNode(int n, const std::string& config) { return StartNode(n, config, NodeOptions()); }
  Node& StartNode(int n, const std::string& config, const NodeOptions& options) {
    Node& node = nodes_[n];
    node.imds = std::make_unique<ImdsSimulator>();
    node.imds->Control("POST", "/_sim/identity",
                       R"({"instanceId": "i-node)" + std::to_string(n) + R"("})");
    node.ckpt = dir_.Join("node" + std::to_string(n) + "/ckpt");
    if (options.create_ckpt) std::filesystem::create_directories(node.ckpt);
    node.agent = std::make_unique<AgentProcess>(
        std::vector<std::string>{"run", "-c", config, "--checkpoint-dir", node.ckpt,
                                 "--imds-endpoint", node.imds->endpoint()},
        AgentEnv(options.env), dir_.Join("node" + std::to_string(n) + ".log"),
        options.pid1 ? AsPid1() : std::vector<std::string>{});
    return node;
  }
  // A spot notice for node `n`, two minutes ahead.
  void Notice(int n) {
    nodes_[n].imds->Control("POST", "/_sim/spot-notice",
                            R"({"action": "terminate", "in_seconds": 120})");
  }

  std::vector<GroupCommit> Groups() {
    auto g = GroupStore(*store_, "job").Groups();
    return g.ok() ? *g : std::vector<GroupCommit>{};
  }
  std::vector<RoundEnd> Ends(uint64_t round) {
    auto e = GroupStore(*store_, "job").Ends(round);
    return e.ok() ? *e : std::vector<RoundEnd>{};
  }
  std::string Logs() {
    std::string out;
    for (auto& [n, node] : nodes_) {
      if (node.agent) out += "--- node " + std::to_string(n) + "\n" + node.agent->Output();
    }
    return out;
  }

  std::map<int, Node> nodes_;
  int configs_ = 0;
};

}  // namespace sg::testing
