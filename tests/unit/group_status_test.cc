// `status` for a job of several nodes (agent/cli/group_status.h) on a file://
// store: the round, each rank with its freshness, who is missing, who waits,
// and the newest group snapshot (docs/multi-node.md, "Rounds").
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <utime.h>

#include "agent/config/config.h"
#include "agent/cli/group_status.h"
#include "agent/repo/group_store.h"
#include "tests/support/file_store_fixture.h"

namespace sg::testing {
namespace {

class GroupStatusTest : public FileStoreTest {
 protected:
  GroupStatusTest() {
    config_.job = "job";
    config_.nodes = 3;
    config_.group.timeout = std::chrono::seconds(30);
  }
  void WriteMember(const std::string& agent, const std::string& instance) {
    MemberRecord m;
    m.agent = agent;
    m.instance = instance;
    m.address = "10.0.0." + instance.substr(2);
    m.job = "job";
    m.nodes = 3;
    m.command = {"torchrun", "train.py"};
    ASSERT_TRUE(GroupStore(*store_, "job").WriteMember(m).ok());
  }
  // The member record of `agent` as last written `seconds` ago.
  void Age(const std::string& agent, int seconds) {
    const std::string path = dir_.Join("store/" + GroupStore(*store_, "job").MemberKey(agent));
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    const time_t then = ::time(nullptr) - seconds;
    utimbuf times{then, then};
    ASSERT_EQ(::utime(path.c_str(), &times), 0) << path;
  }
  nlohmann::ordered_json Status() {
    auto j = GroupStatusJson(config_, *store_);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? *j : nlohmann::ordered_json();
  }

  Config config_;
};

TEST_F(GroupStatusTest, RanksShowTheirFreshnessAndWhoIsMissingOrWaiting) {
  EXPECT_NE(GroupStatusText(Status()).find("no round yet"), std::string::npos);
  RoundPlan plan;
  plan.round = 2;
  plan.nodes = 3;
  plan.generation = 1;
  plan.port = 29500;
  for (int r = 0; r < 3; ++r) {
    const std::string n = std::to_string(r);
    plan.members.push_back({"i-" + n, "a-" + n, "10.0.0." + n});
    WriteMember("a-" + n, "i-" + n);
  }
  ASSERT_TRUE(GroupStore(*store_, "job").WritePlan(plan).ok());
  WriteMember("a-3", "i-3");  // a replacement, not in the round
  Age("a-1", 5);              // within group.timeout
  Age("a-2", 3600);           // stopped beating an hour ago

  nlohmann::ordered_json j = Status();
  EXPECT_EQ(j["round"], 2);
  EXPECT_TRUE(j["round_ended"].is_null());
  ASSERT_EQ(j["ranks"].size(), 3u);
  EXPECT_EQ(j["ranks"][0]["fresh"], true);
  EXPECT_EQ(j["ranks"][1]["fresh"], true);
  EXPECT_GE(j["ranks"][1]["age_seconds"].get<double>(), 4.0);
  EXPECT_EQ(j["ranks"][2]["fresh"], false);
  EXPECT_GE(j["ranks"][2]["age_seconds"].get<double>(), 3599.0);
  EXPECT_EQ(j["ranks"][2]["instance"], "i-2");
  ASSERT_EQ(j["missing"].size(), 1u);
  EXPECT_EQ(j["missing"][0]["rank"], 2);
  EXPECT_EQ(j["missing"][0]["instance"], "i-2");
  ASSERT_EQ(j["waiting"].size(), 1u);
  EXPECT_EQ(j["waiting"][0]["instance"], "i-3");
  const std::string text = GroupStatusText(j);
  EXPECT_NE(text.find("round 2 running"), std::string::npos) << text;
  const size_t rank2 = text.find("  rank 2  i-2  10.0.0.2  seen 36");
  ASSERT_NE(rank2, std::string::npos) << text;
  EXPECT_NE(text.substr(rank2, text.find('\n', rank2) - rank2).find(" s ago  MISSING"),
            std::string::npos)
      << text;
  const size_t rank1 = text.find("  rank 1  i-1  10.0.0.1  seen ");
  ASSERT_NE(rank1, std::string::npos) << text;
  const std::string line1 = text.substr(rank1, text.find('\n', rank1) - rank1);
  EXPECT_EQ(line1.find("MISSING"), std::string::npos) << line1;
  EXPECT_NE(text.find("waiting: i-3"), std::string::npos) << text;
  EXPECT_NE(text.find("no group snapshot yet"), std::string::npos) << text;

  // A node that left (its notice) has no record: gone, and missing; the
  // round's end and the newest group snapshot are shown.
  GroupStore group(*store_, "job");
  ASSERT_TRUE(group.RemoveMember("a-0").ok());
  ASSERT_TRUE(group.EndRound(2, RoundEnd{"notice", "i-0", ""}).ok());
  GroupCommit g;
  g.seq = 4;
  g.nodes = 3;
  g.step = 700;
  g.created = "2026-11-27T10:00:00Z";
  g.parts = {{0, 700, 1, "i-0", 100, 40}, {1, 700, 1, "i-1", 100, 40}, {2, 700, 1, "i-2", 100, 40}};
  ASSERT_TRUE(group.CommitGroup(g).ok());
  j = Status();
  EXPECT_TRUE(j["ranks"][0]["age_seconds"].is_null());
  EXPECT_EQ(j["ranks"][0]["fresh"], false);
  ASSERT_EQ(j["missing"].size(), 2u);
  EXPECT_EQ(j["missing"][0]["instance"], "i-0");
  EXPECT_EQ(j["round_ended"]["reason"], "notice");
  EXPECT_EQ(j["newest_group_snapshot"]["seq"], 4);
  EXPECT_EQ(j["newest_group_snapshot"]["step"], 700);
  EXPECT_EQ(j["newest_group_snapshot"]["size"], 300);
  const std::string after = GroupStatusText(j);
  EXPECT_NE(after.find("round 2 ended: notice on i-0"), std::string::npos) << after;
  EXPECT_NE(after.find("rank 0  i-0  10.0.0.0  gone  MISSING"), std::string::npos) << after;
}

}  // namespace
}  // namespace sg::testing
