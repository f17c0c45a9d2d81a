// Which snapshot the trainer cannot resume from (agent/run/resume_guard.h).
#include "agent/run/resume_guard.h"

#include <gtest/gtest.h>

namespace sg::testing {
namespace {

using std::chrono::seconds;

const std::chrono::system_clock::time_point kT0{seconds(1'795'000'000)};

ExitStatus Code(int code) { return ExitStatus{code, 0}; }

Checkpoint Ckpt(int64_t step) {
  Checkpoint c;
  c.id = "step-" + std::to_string(step) + ".bin";
  c.step = step;
  c.relpaths = {c.id};
  c.resume = c.id;
  c.newest_mtime = kT0;
  return c;
}

TEST(ResumeGuardTest, TwoFailedRunsFromOneSnapshotWithoutANewerCheckpointMakeItSuspect) {
  ResumeGuard guard(2);
  guard.Started(7, CheckpointMark::Of(Ckpt(200)));
  EXPECT_FALSE(guard.Exited(Code(3), Ckpt(200)));
  EXPECT_EQ(guard.failures(), 1);
  guard.Started(7, CheckpointMark::Of(Ckpt(200)));  // the restart, from the same snapshot
  auto verdict = guard.Exited(ExitStatus{0, 11}, Ckpt(200));
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->seq, 7u);
  EXPECT_EQ(verdict->exits, (std::vector<std::string>{"exit code 3", "killed by signal 11"}));
  EXPECT_FALSE(guard.seq());  // the count starts over
}

TEST(ResumeGuardTest, ARunThatWroteANewerCheckpointClearsTheCount) {
  ResumeGuard guard(2);
  guard.Started(7, CheckpointMark::Of(Ckpt(200)));
  EXPECT_FALSE(guard.Exited(Code(3), Ckpt(200)));
  guard.Started(7, CheckpointMark::Of(Ckpt(200)));
  EXPECT_FALSE(guard.Exited(Code(3), Ckpt(210)));  // it got past the resume
  EXPECT_EQ(guard.failures(), 0);
  EXPECT_FALSE(guard.seq());
}

TEST(ResumeGuardTest, AnExit0ClearsTheCount) {
  ResumeGuard guard(2);
  guard.Started(7, CheckpointMark::Of(Ckpt(200)));
  EXPECT_FALSE(guard.Exited(Code(3), Ckpt(200)));
  guard.Started(7, CheckpointMark::Of(Ckpt(200)));
  EXPECT_FALSE(guard.Exited(Code(0), Ckpt(200)));
  EXPECT_EQ(guard.failures(), 0);
}

TEST(ResumeGuardTest, AStartFromAnotherSnapshotCountsAfresh) {
  ResumeGuard guard(2);
  guard.Started(7, CheckpointMark::Of(Ckpt(200)));
  EXPECT_FALSE(guard.Exited(Code(3), Ckpt(200)));
  guard.Started(6, CheckpointMark::Of(Ckpt(100)));
  EXPECT_FALSE(guard.Exited(Code(3), Ckpt(100)));
  EXPECT_EQ(guard.failures(), 1);
}

TEST(ResumeGuardTest, AStartFromNothingTheStoreHoldsIsNeverSuspected) {
  ResumeGuard guard(1);
  guard.Started(std::nullopt, std::nullopt);
  EXPECT_FALSE(guard.Exited(Code(3), std::nullopt));
  EXPECT_FALSE(guard.Exited(Code(3), std::nullopt));
}

TEST(ResumeGuardTest, OneFailureIsEnoughWithMaxFailures1) {
  ResumeGuard guard(1);
  guard.Started(4, CheckpointMark::Of(Ckpt(50)));
  auto verdict = guard.Exited(Code(1), std::nullopt);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->seq, 4u);
}

}  // namespace
}  // namespace sg::testing
