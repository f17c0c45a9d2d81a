// The notice always wins (docs/design.md §9): the real binary, the example
// trainer, the Ceph gateway and the IMDS simulator. A trainer that dies
// while the agent waits for its checkpoint ends the wait at once; without a
// checkpoint signal the trainer gets a window to answer the notice file; a
// checkpoint saved on SIGTERM is uploaded before the agent exits.
#include <chrono>

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
