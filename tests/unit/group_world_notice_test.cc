// A notice's budget on a group node is one node's (agent/run/notice_budget.h):
// the trainer's answer must come in time for its upload at the measured
// rate, and the round is given up on kGiveUpBeforeStop before the deadline.
// On the fake multi-node world (tests/support/fake_group_world.h).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>

#include "agent/config/exit_codes.h"
#include "agent/run/notice_budget.h"
#include "tests/support/group_world_checks.h"

namespace sg::testing {
namespace group_world_notice_test {

using namespace std::chrono_literals;

TEST(GroupWorldNotice, ATrainerThatNeverAnswersIsGivenUpOnOnceItsUploadCouldNotEndInTime) {
  FakeGroupWorld w(2);
  w.trainer.steps = 2000;
  w.trainer.last_save_step = 10;  // then it saves nothing, asked or not
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return w.NewestGroupStep() == 10; }, 60s));
  const std::optional<int64_t> before = w.NewestGroupStep();
  WorldNode& n = w.node(1);
  const auto noticed = w.Elapsed();
  n.imds->PostNotice(40s);
  ASSERT_TRUE(w.RunUntilExited(60s, {1}));
  const auto took = w.Elapsed() - noticed;
  EXPECT_EQ(n.result.exit_code, kExitNotCommitted);
  EXPECT_TRUE(GotSignal(n, SIGTERM)) << "its trainer was stopped";
  // 39-40 s were left when it was read (the notice's time has whole
  // seconds); a checkpoint of a few bytes uploads in a millisecond at the
  // assumed rate; so the wait ends kNoticeSafety before the deadline, 24-25
  // s after the notice, rather than kGiveUpBeforeStop before it (29-30 s).
  EXPECT_GE(took, 40s - 1s - kNoticeSafety - 200ms);
  EXPECT_LE(took, 40s - kNoticeSafety + 200ms);
  EXPECT_EQ(w.NewestGroupStep(), before) << "nothing newer was committed";
}

TEST(GroupWorldNotice, ATrainerThatAnswersIsWaitedForUntilItsPartIsCommitted) {
  FakeGroupWorld w(2);
  w.trainer.steps = 2000;
  w.trainer.save_every = 0;  // only when asked
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return w.node(1).trainer != nullptr; }, 60s));
  w.RunUntil([] { return false; }, 3s);
  WorldNode& n = w.node(1);
  n.imds->PostNotice(40s);
  ASSERT_TRUE(w.RunUntilExited(60s, {1}));
  EXPECT_EQ(n.result.exit_code, kExitInterrupted);
  // The answer is a group snapshot (two when the other trainer answered
  // the group's request a step later than this one answered the notice).
  ASSERT_GE(w.GroupSeqs().size(), 1u) << "the answer is the group snapshot";
}

}  // namespace group_world_notice_test
}  // namespace sg::testing
