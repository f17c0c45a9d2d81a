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

#include "tests/e2e/group_e2e_base.h"
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

class MultiNodeE2E : public GroupE2EBase {
 protected:
  void SetUp() override { UseS3("multi-node-tests"); }

  // A job of `nodes` nodes whose trainer is `command`.
  std::string JobConfig(int nodes, const nlohmann::json& command, const std::string& preset) {
    nlohmann::json c = GroupJobConfig(nodes, command);
    c["preset"] = preset;
    c["restart"] = {{"max", 2}, {"backoff", "200ms"}, {"max_backoff", "1s"}};
    if (group_port_) c["group"]["port"] = group_port_;
    return WriteNumberedConfig(c);
  }

  // A job of `nodes` nodes of tests/tools/group_trainer.py, `steps` of 0.2 s.
  std::string GroupTrainerConfig(int nodes, int steps, const std::vector<std::string>& extra_args) {
    nlohmann::json command = {SPOTGUARD_PYTHON,
                              std::string(SPOTGUARD_SOURCE_DIR) + "/tests/tools/group_trainer.py",
                              "--steps", std::to_string(steps), "--step-seconds", "0.2"};
    for (const std::string& a : extra_args) command.push_back(a);
    return JobConfig(nodes, command, "pytorch");
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
    AgentProcess p(args, AgentEnv({{"SPOTGUARD_LOG_LEVEL", ""}}),
                   dir_.Join("cli-" + std::to_string(++runs) + ".log"));
    auto code = p.Wait(180s);  // a bound for a loaded machine, no verdict
    return {code.value_or(-1), p.Output()};
  }

  int group_port_ = 0;  // group.port when set
};

}  // namespace sg::testing
