// A node of a group whose store stops answering still reads its notice in
// time, asks its trainer for a checkpoint at once, and ends before the
// notice's deadline (docs/design.md §14, "The watch"). The real binary, two
// nodes on the Ceph gateway; node 2 reaches the store through the fault
// proxy, which freezes: every request is held, neither forwarded nor
// answered, until it is released.
#include <regex>

#include "agent/ledger/ledger.h"
#include "common/files.h"
#include "tests/e2e/multi_node_fixture.h"
#include "tests/reliability/crash_support.h"

namespace sg::testing {
namespace {

using WallTime = std::chrono::system_clock::time_point;

// The time an agent's log line starts with ("2026-11-28T22:18:20.708Z ...").
std::optional<WallTime> LineTime(std::string_view line) {
  if (line.size() < 24 || line[23] != 'Z') return std::nullopt;
  const std::optional<LedgerMs> ms = ParseLedgerTime(std::string(line.substr(0, 24)));
  if (!ms) return std::nullopt;
  return WallTime(std::chrono::milliseconds(*ms));
}

// The time of the first line of `log` that holds `text`.
std::optional<WallTime> TimeOfLine(const std::string& log, std::string_view text) {
  const size_t at = log.find(text);
  if (at == std::string::npos) return std::nullopt;
  const size_t start = log.rfind('\n', at);
  return LineTime(std::string_view(log).substr(start == std::string::npos ? 0 : start + 1));
}

// The time of the last line of `log` that starts with one.
std::optional<WallTime> TimeOfLastLine(const std::string& log) {
  std::optional<WallTime> last;
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string::npos) end = log.size();
    if (auto t = LineTime(std::string_view(log).substr(start, end - start))) last = t;
    start = end + 1;
  }
  return last;
}

class GroupStalledStoreE2E : public MultiNodeE2E {
 protected:
  void SetUp() override {
    MultiNodeE2E::SetUp();
    proxy_ = std::make_unique<ToolServer>(
        "fault_proxy.py", std::vector<std::string>{"--upstream", ProxyUpstream(s3_.endpoint)});
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

  // Two configs of a 2-node job of group_trainer.py with 6 MiB parts and
  // 8 s member timeouts: {direct, through the proxy}.
  std::pair<std::string, std::string> SixMibConfigs(const std::string& steps) {
    nlohmann::json command = {SPOTGUARD_PYTHON,
                              std::string(SPOTGUARD_SOURCE_DIR) + "/tests/tools/group_trainer.py",
                              "--steps", steps, "--step-seconds", "0.2", "--pad-mib", "6"};
    auto c = nlohmann::json::parse(*ReadFileToString(JobConfig(2, command, "pytorch")));
    c["group"]["timeout"] = "8s";
    c["lease"]["timeout"] = "6s";
    const std::string direct = dir_.WriteFile("direct.json", c.dump(2));
    c["endpoint"] = proxy_->endpoint();
    return {direct, dir_.WriteFile("slow.json", c.dump(2))};
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
  // The notice was read while the store held every request: the proxy
  // stays frozen until the release below, and a loop held by the store
  // could read nothing before it. (How soon it was read depends on the
  // machine's load and is not asserted; the log says it.)
  ASSERT_TRUE(ReadAfter().has_value()) << Logs();
  // The trainer is asked while the store still holds every request, for
  // the same reason. (The watch logs the notice first and the request just
  // after, so looking for the request without waiting raced with it.)
  EXPECT_TRUE(a.WaitForOutput("asked the trainer for a checkpoint (SIGUSR1) on the notice", 20s))
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
  // The notice's deadline: 20 s after it is posted. Judged by the agent's
  // own log times (the wall clock it logs with), not by when this process
  // saw the exit, so that a loaded machine's slow harness cannot fail it.
  const auto deadline = std::chrono::system_clock::now() + 20s;
  nodes_[2].imds->Control("POST", "/_sim/spot-notice",
                          R"({"action": "terminate", "in_seconds": 20})");
  AgentProcess& a = *nodes_[2].agent;
  const auto code = a.Wait(150s);
  ASSERT_TRUE(code.has_value()) << "the agent hangs on the store\n" << Logs();
  // Nothing could be committed: 74.
  EXPECT_EQ(*code, 74) << Logs();
  const std::string log = a.Output();
  EXPECT_NE(log.find("asked the trainer for a checkpoint"), std::string::npos) << log;
  // The trainer was stopped, and the agent's last line logged, before the
  // deadline (a loop held by the store would take minutes).
  const std::optional<std::chrono::system_clock::time_point> stopped =
      TimeOfLine(log, "the trainer stopped");
  const std::optional<std::chrono::system_clock::time_point> last = TimeOfLastLine(log);
  ASSERT_TRUE(stopped.has_value() && last.has_value()) << log;
  EXPECT_LT(*stopped, deadline) << log;
  // Its last line comes a second before the deadline; a loaded machine may
  // hold the process a little longer, a loop held by the store minutes.
  EXPECT_LE(*last, deadline + 10s) << log;
}

// A replacement whose restore takes longer than group.timeout (a large part
// over a slow link) keeps beating while it restores, so the round it joins
// is not ended `stale` under it, over and over: the restore runs off the
// agent's loop (design.md §14, the restore phase). Its store's answers to GETs come
// through the proxy at 512 KiB/s, and each part holds 6 MiB that do not
// compress: 12 s or more
// against an 8 s member timeout (a timeout long enough that a loaded
// machine's stalls do not end rounds on their own).
TEST_F(GroupStalledStoreE2E, AReplacementRestoringLongerThanTheMemberTimeoutJoinsTheRound) {
  constexpr int kSteps = 40;
  const auto [config, slow] = SixMibConfigs(std::to_string(kSteps));
  // Slow downloads only: the restore is what must outlast the timeout, and
  // the node's part uploads need not take as long.
  proxy_->Control("POST", "/_proxy/config",
                  R"({"bandwidth": 524288, "bandwidth_match": "^GET "})");
  StartNode(1, config);
  StartNode(2, config);
  ASSERT_TRUE(WaitFor([&] { return !Groups().empty(); }, 90s)) << Logs();
  ASSERT_TRUE(KillLikeALostInstance(*nodes_[2].agent)) << Logs();
  StartNode(3, slow);
  for (int n : {1, 3}) ASSERT_EQ(nodes_[n].agent->Wait(240s), 0) << Logs();
  // Restored once: the round it joined ran to the end.
  const std::string log = nodes_[3].agent->Output();
  size_t restores = 0;
  for (size_t at = log.find("restored rank"); at != std::string::npos;
       at = log.find("restored rank", at + 1)) {
    ++restores;
  }
  EXPECT_EQ(restores, 1u) << Logs();
  EXPECT_EQ(log.find("ended: stale"), std::string::npos) << Logs();
  std::vector<std::string> finals;
  for (int rank : {0, 1}) {
    int64_t total = 0;
    for (int64_t step = 1; step <= kSteps; ++step) total = (total * 31 + step * (rank + 1)) % 1000000007;
    finals.push_back(std::to_string(rank) + " " + std::to_string(kSteps) + " " +
                     std::to_string(total));
  }
  EXPECT_EQ(Finals({1, 3}), finals) << Logs();
}

// A notice while the node's part is still being restored (the restore phase): the
// node leaves the membership and ends the round (`left`: nothing of it can
// be saved, so the others stop at once), never starts its trainer and exits
// 75; the survivor stops its trainer without waiting for a checkpoint and
// waits for the next round.
TEST_F(GroupStalledStoreE2E, ANoticeWhileThePartIsRestoredEndsTheRoundAndTheNodeLeaves) {
  const auto [config, slow] = SixMibConfigs("100000");
  // 12 s or more of restore: room for the notice on a loaded machine.
  proxy_->Control("POST", "/_proxy/config", R"({"bandwidth": 524288})");
  StartNode(1, config);
  StartNode(2, config);
  ASSERT_TRUE(WaitFor([&] { return !Groups().empty(); }, 90s)) << Logs();
  ASSERT_TRUE(KillLikeALostInstance(*nodes_[2].agent)) << Logs();
  StartNode(3, slow);
  AgentProcess& a = *nodes_[3].agent;
  ASSERT_TRUE(a.WaitForOutput("restoring rank", 120s)) << Logs();
  nodes_[3].imds->Control("POST", "/_sim/spot-notice",
                          R"({"action": "terminate", "in_seconds": 120})");
  const auto code = a.Wait(60s);
  ASSERT_TRUE(code.has_value()) << Logs();
  EXPECT_EQ(*code, 75) << Logs();
  const std::string log = a.Output();
  EXPECT_NE(log.find("before its trainer started"), std::string::npos) << log;
  EXPECT_EQ(log.find("starts at step"), std::string::npos) << "no trainer ran on node 3\n" << log;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(leaving round (\d+) before)"))) << log;
  const uint64_t round = std::stoull(m[1]);
  bool left = false;
  for (const RoundEnd& e : Ends(round)) left |= e.reason == "left" && e.by == "i-node3";
  EXPECT_TRUE(left) << Logs();
  // The survivor stops its trainer at once: it reads the round's end as
  // `left`, or first misses node 3's record (`stale`); either way it never
  // waits for a checkpoint ("round N ends: ... asking the trainer").
  const std::string r = std::to_string(round);
  ASSERT_TRUE(nodes_[1].agent->WaitForOutput("round " + r + " ended: ", 60s)) << Logs();
  EXPECT_EQ(nodes_[1].agent->Output().find("round " + r + " ends: "), std::string::npos) << Logs();
  // It left the membership at once: no round was planned with it after that.
  auto plan = GroupStore(*store_, "job").NewestPlan();
  ASSERT_TRUE(plan.ok() && *plan);
  EXPECT_EQ((*plan)->round, round) << Logs();
  EXPECT_FALSE(nodes_[1].agent->Wait(0ms).has_value()) << "the survivor waits\n" << Logs();
}

}  // namespace
}  // namespace sg::testing
