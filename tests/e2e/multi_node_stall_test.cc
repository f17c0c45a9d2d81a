// A node of a group whose store stops answering still reads its notice in
// time, asks its trainer for a checkpoint at once, and ends before the
// notice's deadline (docs/design.md §14, "The watch"). The real binary, two
// nodes on the Ceph gateway; node 2 reaches the store through the fault
// proxy, which freezes: every request is held, neither forwarded nor
// answered, until it is released.
#include <regex>

#include "common/files.h"
#include "tests/e2e/multi_node_fixture.h"

namespace sg::testing {
namespace {

using Steady = std::chrono::steady_clock;

class GroupStalledStoreE2E : public MultiNodeE2E {
 protected:
  void SetUp() override {
    MultiNodeE2E::SetUp();
    std::string upstream = s3_.endpoint.substr(s3_.endpoint.find("://") + 3);
    while (!upstream.empty() && upstream.back() == '/') upstream.pop_back();
    proxy_ = std::make_unique<ToolServer>("fault_proxy.py",
                                          std::vector<std::string>{"--upstream", upstream});
    ASSERT_FALSE(proxy_->endpoint().empty());
  }
  void TearDown() override {
    if (proxy_) proxy_->Control("POST", "/_proxy/release");
  }

  // Two nodes of group_trainer.py; node 2's store is behind the proxy. The
  // member timeout is long (60 s): the freeze must not end the round
  // `stale` before the notice is taken.
  void StartTwo() {
    nlohmann::json command = {SPOTGUARD_PYTHON,
                              std::string(SPOTGUARD_SOURCE_DIR) + "/tests/tools/group_trainer.py",
                              "--steps", "100000", "--step-seconds", "0.2"};
    const std::string direct = JobConfig(2, command, "pytorch");
    auto c = nlohmann::json::parse(*ReadFileToString(direct));
    c["group"]["timeout"] = "60s";
    c["lease"]["timeout"] = "30s";
    const std::string config = dir_.WriteFile("direct.json", c.dump(2));
    c["endpoint"] = proxy_->endpoint();
    const std::string proxied = dir_.WriteFile("proxied.json", c.dump(2));
    StartNode(1, config);
    StartNode(2, proxied);
    ASSERT_TRUE(WaitFor([&] { return !Groups().empty(); }, 90s)) << Logs();
  }

  void Freeze() {
    proxy_->Control("POST", "/_proxy/config", R"({"freeze_match": "."})");
    ASSERT_TRUE(WaitFor(
        [&] {
          auto stats = nlohmann::json::parse(proxy_->Control("GET", "/_proxy/stats"));
          return stats["frozen"].get<bool>() && stats["held"].get<int>() > 0;
        },
        30s))
        << "the store never froze";
  }

  // "(read 0.3s after it was posted)" in node 2's log: the detection delay.
  std::optional<double> ReadAfter() {
    std::smatch m;
    const std::string log = nodes_[2].agent->Output();
    if (!std::regex_search(log, m, std::regex(R"(\(read ([0-9.]+)s after it was posted\))"))) {
      return std::nullopt;
    }
    return std::stod(m[1]);
  }

  std::unique_ptr<ToolServer> proxy_;
};

TEST_F(GroupStalledStoreE2E, ANoticeIsTakenAtOnceWhileTheStoreHangsAndAnsweredOnceItAnswers) {
  StartTwo();
  Freeze();
  nodes_[2].imds->Control("POST", "/_sim/spot-notice",
                          R"({"action": "terminate", "in_seconds": 120})");
  AgentProcess& a = *nodes_[2].agent;
  ASSERT_TRUE(a.WaitForOutput("INTERRUPTION NOTICE", 60s)) << Logs();
  const std::optional<double> delay = ReadAfter();
  ASSERT_TRUE(delay.has_value()) << Logs();
  // One poll interval (200 ms) plus a margin for a loaded machine; a loop
  // held by the store reads it 30 s or more late.
  EXPECT_LT(*delay, 5.0) << Logs();
  // The trainer was asked while the store still held every request.
  EXPECT_TRUE(a.WaitForOutput("asked the trainer for a checkpoint (SIGUSR1) on the notice", 0ms))
      << Logs();
  EXPECT_TRUE(nlohmann::json::parse(proxy_->Control("GET", "/_proxy/stats"))["frozen"].get<bool>());

  // The store answers again: the round ends on both nodes with a group
  // snapshot that answers the request, and node 2 exits 75.
  const int64_t before = Groups().back().step;
  proxy_->Control("POST", "/_proxy/release");
  const auto code = a.Wait(150s);
  ASSERT_TRUE(code.has_value()) << Logs();
  EXPECT_EQ(*code, 75) << Logs();
  ASSERT_FALSE(Groups().empty());
  EXPECT_GT(Groups().back().step, before) << Logs();
  std::vector<RoundEnd> ends = Ends(1);
  ASSERT_FALSE(ends.empty());
  EXPECT_EQ(ends.front().reason, "notice") << Logs();
  ASSERT_TRUE(nodes_[1].agent->WaitForOutput("waiting for the next round", 60s)) << Logs();
}

TEST_F(GroupStalledStoreE2E, AStoreThatNeverAnswersStillGetsTheTrainerStoppedBeforeTheDeadline) {
  StartTwo();
  Freeze();
  const auto posted = Steady::now();
  nodes_[2].imds->Control("POST", "/_sim/spot-notice",
                          R"({"action": "terminate", "in_seconds": 30})");
  AgentProcess& a = *nodes_[2].agent;
  const auto code = a.Wait(150s);
  const auto took = Steady::now() - posted;
  ASSERT_TRUE(code.has_value()) << "the agent hangs on the store\n" << Logs();
  // Nothing could be committed: 74. The trainer was stopped 8 s before the
  // deadline and the process ended a second before it: 29 s, and a margin
  // for a loaded machine (a loop held by the store takes minutes).
  EXPECT_EQ(*code, 74) << Logs();
  EXPECT_LT(took, 45s) << Logs();
  const std::string log = a.Output();
  EXPECT_NE(log.find("the trainer stopped"), std::string::npos) << log;
  EXPECT_NE(log.find("asked the trainer for a checkpoint"), std::string::npos) << log;
}

}  // namespace
}  // namespace sg::testing
