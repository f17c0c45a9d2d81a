// A group's records under an operator's hands (docs/multi-node.md): a failed
// job says how to go on and is cleared by `reset-failure` or by a changed
// config; a job that ran on one node is not started over by a group; and a
// secret in the trainer's command reaches no stored object and no log line.
// The real binary, group_trainer.py, the Ceph gateway; the verdicts wait for
// exits and records, never for time.
#include "common/zstd_codec.h"
#include "tests/e2e/multi_node_fixture.h"

namespace sg::testing {
namespace {

class GroupRecordsE2E : public MultiNodeE2E {
 protected:
  // A config of `nodes` with `edit` applied to its JSON.
  std::string Edited(const std::string& name, const std::string& config,
                     const std::function<void(nlohmann::json&)>& edit) {
    auto c = nlohmann::json::parse(*ReadFileToString(config));
    edit(c);
    return dir_.WriteFile(name, c.dump(2));
  }
};

TEST_F(GroupRecordsE2E, AFailedJobSaysHowToGoOnAndIsClearedByResetOrAChangedConfig) {
  // restart.max 0: the first crashed round fails the job.
  const std::string failing = Edited(
      "failing.json", GroupTrainerConfig(2, 20, {"--fail-at", "3", "--fail-rank", "0"}),
      [](nlohmann::json& c) { c["restart"]["max"] = 0; });
  for (int n : {1, 2}) StartNode(n, failing);
  for (int n : {1, 2}) ASSERT_EQ(nodes_[n].agent->Wait(180s), 1) << Logs();
  ASSERT_TRUE(store_->Head("job/group/failed.json").ok()) << Logs();

  // The same config again: exit 1 at once, saying how to go on.
  StartNode(3, failing);
  ASSERT_EQ(nodes_[3].agent->Wait(120s), 1) << Logs();
  EXPECT_NE(nodes_[3].agent->Output().find("To go on, fix the trainer and run `spotguard "
                                           "reset-failure`"),
            std::string::npos)
      << Logs();
  auto [status_code, status] = Cli({"status", "-c", failing});
  ASSERT_EQ(status_code, 0) << status;
  EXPECT_NE(status.find("FAILED at "), std::string::npos) << status;
  EXPECT_NE(status.find("a trainer crashed in 1 rounds in a row (restart.max 0)"),
            std::string::npos)
      << status;
  EXPECT_NE(status.find("spotguard reset-failure"), std::string::npos) << status;

  // reset-failure clears it (and says so when there is nothing to clear).
  auto record = static_cast<ObjectStore&>(*store_).Get("job/group/failed.json");
  ASSERT_TRUE(record.ok());
  auto [reset_code, reset] = Cli({"reset-failure", "-c", failing});
  EXPECT_EQ(reset_code, 0) << reset;
  EXPECT_NE(reset.find("cleared the failure of job job"), std::string::npos) << reset;
  EXPECT_TRUE(store_->Head("job/group/failed.json").status().Is(StatusCode::kNotFound));
  auto [again_code, again] = Cli({"reset-failure", "-c", failing});
  EXPECT_EQ(again_code, 0) << again;
  EXPECT_NE(again.find("no failure record"), std::string::npos) << again;

  // The failure as it was, and a fixed command: cleared on its own, logged.
  ASSERT_TRUE(store_->Put("job/group/failed.json", *record, PutCondition::None()).ok());
  // (restart.max 1: an agent that did not clear the failure itself counts
  // the round that failed once.)
  const std::string fixed = Edited("fixed.json", GroupTrainerConfig(2, 20, {}),
                                   [](nlohmann::json& c) { c["restart"]["max"] = 1; });
  for (int n : {4, 5}) StartNode(n, fixed);
  for (int n : {4, 5}) EXPECT_EQ(nodes_[n].agent->Wait(240s), 0) << Logs();
  EXPECT_NE(Logs().find("and its command or config changed since: clearing the failure"),
            std::string::npos)
      << Logs();
  EXPECT_TRUE(store_->Head("job/complete").ok());
}

TEST_F(GroupRecordsE2E, AJobThatRanOnOneNodeIsNotStartedOverByAGroup) {
  // A single-node snapshot of the job, as `run` with nodes: 1 leaves it.
  const std::string single = GroupTrainerConfig(1, 20, {});
  std::filesystem::create_directories(dir_.Join("single"));
  dir_.WriteFile("single/step_10.pt", "0 10 12345\n");
  auto [snap_code, snap] = Cli({"snapshot", "-c", single, "--dir", dir_.Join("single")});
  ASSERT_EQ(snap_code, 0) << snap;

  StartNode(1, GroupTrainerConfig(2, 20, {}));
  ASSERT_EQ(nodes_[1].agent->Wait(120s), 2) << Logs();
  EXPECT_NE(Logs().find("single-node snapshot(s) (the newest: 0000000001"), std::string::npos)
      << Logs();
  EXPECT_NE(Logs().find("and no group snapshot, and this config says nodes: 2"), std::string::npos)
      << Logs();
  EXPECT_NE(Logs().find("group.from_single"), std::string::npos) << Logs();
  EXPECT_TRUE(Groups().empty());

  // Told to, the group starts fresh (and says so).
  const std::string fresh = Edited("fresh.json", GroupTrainerConfig(2, 20, {}),
                                   [](nlohmann::json& c) { c["group"]["from_single"] = "fresh"; });
  for (int n : {2, 3}) StartNode(n, fresh);
  for (int n : {2, 3}) EXPECT_EQ(nodes_[n].agent->Wait(240s), 0) << Logs();
  EXPECT_NE(Logs().find("starting the group of 2 nodes fresh"), std::string::npos) << Logs();
}

TEST_F(GroupRecordsE2E, ASecretInTheCommandReachesNoStoredObjectAndNoLogLine) {
  const std::string secret_a = "SGSECRETA" + RandomHex(8), secret_b = "SGSECRETB" + RandomHex(8);
  const std::string config = GroupTrainerConfig(2, 20, {"--api-key=" + secret_a});
  const std::string odd = GroupTrainerConfig(2, 20, {"--api-key=" + secret_b});
  // The odd member meets the coordinator before the group can plan (or
  // finish) without it: node 1 coordinates, node 3 is refused, and only then
  // does node 2 join. Started together, a short job could complete before
  // node 3 ever met it, and node 3 would start into a complete job (exit 0).
  StartNode(1, config);
  ASSERT_TRUE(nodes_[1].agent->WaitForOutput("coordinating job", 180s)) << Logs();
  // A member whose command differs only in its secret is refused, the
  // difference named without either secret.
  StartNode(3, odd);
  ASSERT_EQ(nodes_[3].agent->Wait(180s), 2) << Logs();
  EXPECT_NE(nodes_[3].agent->Output().find("differ in a redacted argument"), std::string::npos)
      << Logs();
  StartNode(2, config);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto plan = GroupStore(*store_, "job").NewestPlan();
        return plan.ok() && plan->has_value();
      },
      180s))
      << Logs();
  // The member records, rewritten every heartbeat, name the command redacted.
  auto members = ListAll(*store_, "job/group/members/");
  ASSERT_TRUE(members.ok() && !members->empty());
  for (const ObjectInfo& o : *members) {
    auto body = static_cast<ObjectStore&>(*store_).Get(o.key);
    if (!body.ok()) continue;
    EXPECT_EQ(body->find(secret_a), std::string::npos) << *body;
    EXPECT_NE(body->find("--api-key=<redacted>"), std::string::npos) << *body;
  }
  for (int n : {1, 2}) EXPECT_EQ(nodes_[n].agent->Wait(240s), 0) << Logs();

  std::vector<std::string> leaks;
  const std::string logs = Logs();
  for (const std::string& s : {secret_a, secret_b}) {
    if (logs.find(s) != std::string::npos) leaks.push_back("an agent's log holds " + s);
  }
  auto objects = ListAll(*store_, "");
  ASSERT_TRUE(objects.ok());
  bool refused = false;
  for (const ObjectInfo& o : *objects) {
    auto body = static_cast<ObjectStore&>(*store_).Get(o.key);
    if (!body.ok()) continue;  // retention took it meanwhile
    if (o.key.ends_with(".log.zst")) {  // a shipped log segment: its text
      auto text = DecodeSizedFrame(*body, 1ull << 30);
      ASSERT_TRUE(text.ok()) << o.key;
      body = std::move(text);
    }
    refused |= o.key.find("/group/refused/") != std::string::npos;
    for (const std::string& s : {secret_a, secret_b}) {
      if (body->find(s) != std::string::npos) leaks.push_back(o.key + " holds " + s);
    }
  }
  EXPECT_TRUE(refused) << "the refusal record was scanned too";
  for (const std::string& l : leaks) ADD_FAILURE() << l;
}

}  // namespace
}  // namespace sg::testing
