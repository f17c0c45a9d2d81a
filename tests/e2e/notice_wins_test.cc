// The notice always wins (docs/design.md §9): the real binary, the example
// trainer, the Ceph gateway and the IMDS simulator. A trainer that dies
// while the agent waits for its checkpoint ends the wait at once; without a
// checkpoint signal the trainer gets a window to answer the notice file; a
// checkpoint saved on SIGTERM is uploaded before the agent exits.
#include <chrono>
#include <regex>

#include "tests/e2e/agent_e2e_fixture.h"

namespace sg::testing {
namespace {

using Steady = std::chrono::steady_clock;

TEST_F(AgentE2E, ATrainerKilledByTheCheckpointSignalIsSeenAtOnce) {
  // The example trainer has no SIGUSR2 handler: the request kills it.
  const std::string config =
      WriteConfig("a", {"--steps", "100000"}, {{"checkpoint_signal", "SIGUSR2"}});
  auto a = StartAgent("a", config, "ckpt", imds_);
  ASSERT_TRUE(WaitFor([&] { return !Committed().empty(); }, 30s)) << a->Output();
  const auto posted = Steady::now();
  imds_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 110})");
  const auto exit_code = a->Wait(120s);
  const auto took = Steady::now() - posted;
  ASSERT_TRUE(exit_code.has_value()) << a->Output();
  EXPECT_EQ(*exit_code, 75) << a->Output();
  EXPECT_NE(a->Output().find("the trainer ended (killed by SIGUSR2) while the job was ending"),
            std::string::npos)
      << a->Output();
  // Waiting out the budget would take 95 s; the death ends the wait once its
  // files settle (300 ms here).
  EXPECT_LT(took, 45s) << a->Output();
}

TEST_F(AgentE2E, WithoutACheckpointSignalTheTrainerAnswersTheNoticeFile) {
  // No periodic checkpoints: the only one is the answer to the notice file.
  const std::string config =
      WriteConfig("a", {"--steps", "100000", "--checkpoint-every", "100000000", "--save-on-notice"},
                  {{"checkpoint_signal", "none"}});
  auto a = StartAgent("a", config, "ckpt", imds_);
  ASSERT_TRUE(a->WaitForOutput("step 20 ", 30s)) << a->Output();
  imds_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 60})");
  const auto exit_code = a->Wait(90s);
  ASSERT_TRUE(exit_code.has_value()) << a->Output();
  EXPECT_EQ(*exit_code, 75) << a->Output();
  EXPECT_NE(a->Output().find("interruption notice seen"), std::string::npos) << a->Output();
  ASSERT_EQ(Committed().size(), 1u) << a->Output();
  const Manifest m = ManifestOf(Committed().front());
  ASSERT_TRUE(m.step.has_value());
  EXPECT_GE(*m.step, 20);
}

// The settle time must not eat the budget: the checkpoint the trainer saves
// on SIGUSR1 goes up once it is closed and quiet for a second, not after the
// 30 s settle time configured here (docs/checkpoints.md, "Settle time").
TEST_F(AgentE2E, TheAnswerToTheCheckpointSignalIsTakenWithoutTheWholeSettleTime) {
  const std::string config = WriteConfig(
      "a", {"--steps", "100000", "--checkpoint-every", "100000000"}, {{"settle_time", "30s"}});
  auto a = StartAgent("a", config, "ckpt", imds_);
  ASSERT_TRUE(a->WaitForOutput("step 20 ", 30s)) << a->Output();
  imds_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 120})");
  const auto exit_code = a->Wait(120s);
  ASSERT_TRUE(exit_code.has_value()) << a->Output();
  EXPECT_EQ(*exit_code, 75) << a->Output();
  ASSERT_EQ(Committed().size(), 1u) << a->Output();
  std::smatch m;
  const std::string log = a->Output();
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(committed in ([0-9.]+)s from the notice)")))
      << log;
  // Counted from the notice's posting (its deadline less 120 s): waiting out
  // the settle time could not commit before 30 s.
  EXPECT_LT(std::stod(m[1]), 28.0) << log;
}

TEST_F(AgentE2E, ACheckpointSavedOnSigtermIsUploadedBeforeTheExit) {
  // The trainer ignores the notice file and saves only on SIGTERM.
  const std::string config = WriteConfig(
      "a", {"--steps", "100000", "--checkpoint-every", "100000000", "--save-on-sigterm"},
      {{"checkpoint_signal", "none"}});
  auto a = StartAgent("a", config, "ckpt", imds_);
  ASSERT_TRUE(a->WaitForOutput("step 20 ", 30s)) << a->Output();
  // 40 s left: a window of about 6 s for the notice file, then SIGTERM.
  imds_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 40})");
  const auto exit_code = a->Wait(90s);
  ASSERT_TRUE(exit_code.has_value()) << a->Output();
  EXPECT_EQ(*exit_code, 75) << a->Output();
  EXPECT_NE(a->Output().find("saved on SIGTERM"), std::string::npos) << a->Output();
  EXPECT_NE(a->Output().find("on the stop signal; uploading it"), std::string::npos) << a->Output();
  ASSERT_EQ(Committed().size(), 1u) << a->Output();
  EXPECT_EQ(ManifestOf(Committed().front()).step, NewestStepOnDisk(dir_.Join("ckpt")));
}

}  // namespace
}  // namespace sg::testing

namespace sg::testing {
namespace {

// The agent's store behind a fault proxy that freezes: from the first lease
// renewal on, every request is held, neither forwarded nor answered.
class StalledStoreE2E : public AgentE2E {
 protected:
  void SetUp() override {
    AgentE2E::SetUp();
    proxy_ = std::make_unique<ToolServer>(
        "fault_proxy.py", std::vector<std::string>{"--upstream", ProxyUpstream(s3_.endpoint)});
    ASSERT_FALSE(proxy_->endpoint().empty());
  }
  void TearDown() override {
    if (proxy_) proxy_->Control("POST", "/_proxy/release");
  }
  // Starts an agent, waits for its first commit, then freezes the store.
  std::unique_ptr<AgentProcess> StartAndFreeze(
      nlohmann::json overrides = nlohmann::json::object()) {
    overrides["endpoint"] = proxy_->endpoint();
    const std::string config = WriteConfig("a", {"--steps", "100000"}, overrides);
    auto a = StartAgent("a", config, "ckpt", imds_);
    EXPECT_TRUE(WaitFor([&] { return !Committed().empty(); }, 30s)) << a->Output();
    proxy_->Control("POST", "/_proxy/config", R"({"freeze_match": "PUT [^ ]*/lease"})");
    EXPECT_TRUE(WaitFor(
        [&] {
          auto stats = nlohmann::json::parse(proxy_->Control("GET", "/_proxy/stats"));
          return stats["frozen"].get<bool>() && stats["held"].get<int>() > 0;
        },
        30s))
        << "the store never froze";
    return a;
  }
  // "(read 0.3s after it was posted)" in the agent's log: the detection delay.
  static std::optional<double> ReadAfter(const std::string& log) {
    std::smatch m;
    if (!std::regex_search(log, m, std::regex(R"(\(read ([0-9.]+)s after it was posted\))"))) {
      return std::nullopt;
    }
    return std::stod(m[1]);
  }
  // The agent gave up on the hung final upload, stopped the trainer and
  // exited 74, well before a hang would have ended (`from`: the notice or
  // the signal; the bound has a margin for a loaded machine).
  static void ExpectGaveUpAndExited74(AgentProcess& a, std::chrono::steady_clock::time_point from,
                                      std::chrono::seconds bound) {
    const auto code = a.Wait(150s);
    const auto took = std::chrono::steady_clock::now() - from;
    ASSERT_TRUE(code.has_value()) << "the agent hangs on the store\n" << a.Output();
    EXPECT_EQ(*code, 74) << a.Output();
    const std::string log = a.Output();
    EXPECT_NE(log.find("did not finish before the deadline"), std::string::npos) << log;
    EXPECT_NE(log.find("the trainer stopped"), std::string::npos) << log;
    EXPECT_LT(took, bound) << log;
  }
  std::unique_ptr<ToolServer> proxy_;
};

TEST_F(StalledStoreE2E, ANoticeIsReadInTimeWhileTheStoreDoesNotAnswer) {
  auto a = StartAndFreeze();
  // A whole two minutes: the notice's posting time is its deadline less 120 s.
  imds_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 120})");
  ASSERT_TRUE(a->WaitForOutput("INTERRUPTION NOTICE", 60s)) << a->Output();
  const std::optional<double> delay = ReadAfter(a->Output());
  ASSERT_TRUE(delay.has_value()) << a->Output();
  // One poll interval (200 ms) plus 1 s, with room for a loaded machine;
  // a loop stuck behind the store reads it 30 s or more late.
  EXPECT_LT(*delay, 20.0) << a->Output();
  // The store answers again: the final snapshot goes up.
  proxy_->Control("POST", "/_proxy/release");
  const auto code = a->Wait(120s);
  ASSERT_TRUE(code.has_value()) << a->Output();
  EXPECT_EQ(*code, 75) << a->Output();
}

TEST_F(StalledStoreE2E, AStoreThatNeverAnswersStillGetsTheTrainerStoppedAndExits74) {
  auto a = StartAndFreeze();
  const auto posted = std::chrono::steady_clock::now();
  imds_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 30})");
  // Given up 10 s before the deadline, the trainer stopped, and the exit
  // waits at most 15 s for what still hangs: 35 s, and a margin.
  ExpectGaveUpAndExited74(*a, posted, 60s);
}

// SIGTERM has a deadline too (stop_timeout, the engine's kill): a final
// upload the store never answers is given up on, the trainer is stopped, and
// the exit says the snapshot was not committed.
TEST_F(StalledStoreE2E, OnSigtermAStoreThatNeverAnswersStillEndsBeforeTheStopTimeout) {
  auto a = StartAndFreeze({{"stop_timeout", "30s"}});
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(a->pid(), SIGTERM), 0);
  // Given up 10 s before the 30 s, the exit's wait capped 1 s before it.
  ExpectGaveUpAndExited74(*a, sent, 60s);
}

// The lease's calls fit within its heartbeat (docs/s3.md, "Timeouts"): a
// renewal the store never answers is given up on and tried again, and the
// agent goes on committing once the store answers.
TEST_F(StalledStoreE2E, AHungLeaseRenewalIsGivenUpOnWithinItsDeadline) {
  const std::string config =
      WriteConfig("a", {"--steps", "100000"}, {{"endpoint", proxy_->endpoint()}});
  auto a = StartAgent("a", config, "ckpt", imds_);
  ASSERT_TRUE(WaitFor([&] { return !Committed().empty(); }, 30s)) << a->Output();
  proxy_->Control("POST", "/_proxy/config",
                  R"({"rate": 1, "kinds": ["hang"], "match": "PUT [^ ]*/lease$",
                      "hang_seconds": 600})");
  // Without a deadline the first hung renewal waits for the proxy's 600 s.
  ASSERT_TRUE(a->WaitForOutput("renewing the lease failed (will retry)", 60s)) << a->Output();
  EXPECT_NE(a->Output().find("no answer from"), std::string::npos) << a->Output();
  proxy_->Control("POST", "/_proxy/config", R"({"rate": 0, "match": ""})");
  const size_t before = Committed().size();
  EXPECT_TRUE(WaitFor([&] { return Committed().size() > before; }, 60s))
      << "no commit after the store answered again\n"
      << a->Output();
  imds_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 60})");
  const auto code = a->Wait(120s);
  ASSERT_TRUE(code.has_value()) << a->Output();
  EXPECT_EQ(*code, 75) << a->Output();
}

// A renewal the server carried out but whose answer was lost (so its retry
// meets a changed etag) is the agent's own write, not a takeover: the agent
// is not fenced by itself.
TEST_F(StalledStoreE2E, ALostAnswerToARenewalDoesNotFenceTheAgent) {
  const std::string config =
      WriteConfig("a", {"--steps", "100000"}, {{"endpoint", proxy_->endpoint()}});
  auto a = StartAgent("a", config, "ckpt", imds_);
  ASSERT_TRUE(WaitFor([&] { return !Committed().empty(); }, 30s)) << a->Output();
  proxy_->Control("POST", "/_proxy/config",
                  R"({"rate": 1, "kinds": ["lost_response"], "match": "PUT [^ ]*/lease$",
                      "max_faults": 1})");
  ASSERT_TRUE(WaitFor(
      [&] {
        auto stats = nlohmann::json::parse(proxy_->Control("GET", "/_proxy/stats"));
        return stats["injected"].get<int>() >= 1;
      },
      30s))
      << a->Output();
  const size_t before = Committed().size();
  EXPECT_TRUE(WaitFor([&] { return Committed().size() > before + 1; }, 60s)) << a->Output();
  EXPECT_EQ(a->Output().find("FENCED"), std::string::npos) << a->Output();
  imds_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 60})");
  const auto code = a->Wait(120s);
  ASSERT_TRUE(code.has_value()) << a->Output();
  EXPECT_EQ(*code, 75) << a->Output();
}

}  // namespace
}  // namespace sg::testing
