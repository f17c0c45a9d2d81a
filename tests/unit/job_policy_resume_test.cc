// The job policy's resume-side decisions (agent/run/job_policy.h): an exit 0
// that complete_when does not accept, the fall back from a suspect
// snapshot, and the checkpoint cadence. Observations in, actions out.
#include <gtest/gtest.h>
#include <signal.h>

#include "agent/run/job_policy.h"
#include "tests/unit/job_actions_support.h"

namespace sg::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
namespace a = job_action;

constexpr Clock::WallTime kWall0 = Clock::WallTime(seconds(1'795'000'000));

PolicyTime At(milliseconds offset) {
  return {Clock::MonoTime(seconds(1000)) + offset, kWall0 + offset};
}

Checkpoint Ckpt(int64_t step, milliseconds offset) {
  Checkpoint c;
  c.id = "step_" + std::to_string(step) + ".pt";
  c.step = step;
  c.relpaths = {c.id};
  c.resume = c.id;
  c.newest_mtime = kWall0 + offset;
  return c;
}

RestoredState Restored(int64_t step, uint64_t seq) {
  RestoredState s;
  s.committed = CheckpointMark::Of(Ckpt(step, -seconds(600)));
  s.committed_step = step;
  s.last_seq = seq;
  s.resume = "/ckpt/" + Ckpt(step, {}).id;
  return s;
}

JobPolicy Started(JobPolicyOptions o, RestoredState state = Restored(100, 3)) {
  o.checkpoint_signal = SIGUSR1;
  JobPolicy p(o);
  p.OnLeaseAcquired(At(milliseconds(0)));
  p.OnRestored(At(milliseconds(0)), state);
  return p;
}

TEST(JobPolicyResumeTest, AnUnearnedExit0IsACrashAndTheJobIsNotMarkedComplete) {
  JobPolicyOptions o;
  o.restart_max = 1;
  o.restart_backoff = seconds(1);
  JobPolicy p = Started(o);
  const std::string why = "exited 0 at step 61200, below step_at_least 100000";
  JobActions exited = p.OnTrainerExited(At(seconds(10)), ExitStatus{0, 0}, why);
  EXPECT_EQ(p.phase(), JobPhase::kTraining);  // not the final snapshot
  EXPECT_EQ(p.end(), JobEnd::kNone);
  EXPECT_TRUE(Said(exited, "the trainer " + why + ": not complete (complete_when)"));
  ASSERT_NE(FindEvent(exited, "unearned"), nullptr);
  EXPECT_EQ(FindEvent(exited, "unearned")->data["why"], why);
  EXPECT_EQ(Find<a::WriteCompleteMarker>(exited), nullptr);
  // Restarted from the newest checkpoint after the backoff.
  const JobActions ticked = p.OnTick(At(seconds(11)));
  const auto* restart = Find<a::StartTrainer>(ticked);
  ASSERT_NE(restart, nullptr);
  EXPECT_TRUE(restart->resume_from_newest_local);
  // Unearned again with no restart left: the job fails, never complete.
  JobActions failed = p.OnTrainerExited(At(seconds(20)), ExitStatus{0, 0}, why);
  EXPECT_EQ(p.end(), JobEnd::kFailed);
  EXPECT_EQ(Find<a::WriteCompleteMarker>(failed), nullptr);
  EXPECT_EQ(Find<a::PerformOnComplete>(failed), nullptr);
}

TEST(JobPolicyResumeTest, AnExit0WithNothingUnearnedCompletesAsBefore) {
  JobPolicy p = Started({});
  JobActions exited = p.OnTrainerExited(At(seconds(10)), ExitStatus{0, 0});
  EXPECT_EQ(p.phase(), JobPhase::kFinalSnapshot);
  EXPECT_EQ(p.end(), JobEnd::kComplete);
}

TEST(JobPolicyResumeTest, AFallbackTakesTheOlderSnapshotAsCommittedAndResetsTheRestarts) {
  JobPolicyOptions o;
  o.restart_max = 1;
  o.restart_backoff = seconds(1);
  JobPolicy p = Started(o, Restored(200, 7));
  p.OnTrainerExited(At(seconds(1)), ExitStatus{3, 0});  // restart 1 of 1
  p.OnTick(At(seconds(3)));
  JobActions fell = p.OnFallback(At(seconds(4)), 7, Restored(100, 6));
  ASSERT_NE(FindEvent(fell, "fallback"), nullptr);
  EXPECT_EQ(FindEvent(fell, "fallback")->data["suspect"], 7);
  EXPECT_EQ(FindEvent(fell, "fallback")->data["seq"], 6);
  EXPECT_EQ(p.last_seq(), 6u);
  EXPECT_EQ(p.committed_step(), 100);
  // The budget starts over: the crash that led to it is restarted, not fatal.
  p.OnTrainerExited(At(seconds(4)), ExitStatus{3, 0});
  EXPECT_EQ(p.end(), JobEnd::kNone);
  EXPECT_NE(Find<a::StartTrainer>(p.OnTick(At(seconds(10)))), nullptr);
  // A checkpoint at a step below the suspect one's is new work: uploaded.
  JobActions found = p.OnCheckpoints(At(seconds(400)), {Ckpt(150, seconds(300))}, {});
  ASSERT_NE(Find<a::StartUpload>(found), nullptr);
}

JobPolicyOptions Cadence(Seconds mtbf) {
  JobPolicyOptions o;
  o.upload_interval = seconds(100'000);
  o.cadence = CadenceOptions{.min = Seconds(1), .max = Seconds(100'000), .mtbf = mtbf};
  return o;
}

// The times the policy signals the trainer during `span`, ticking every second.
std::vector<int> SignalTimes(JobPolicy& p, int from, int to) {
  std::vector<int> at;
  for (int s = from; s <= to; ++s) {
    if (Find<a::SignalTrainer>(p.OnTick(At(seconds(s))))) at.push_back(s);
  }
  return at;
}

TEST(JobPolicyResumeTest, TheCadenceAsksAtYoungsIntervalAndLogsEachChange) {
  // C 60 s (the initial estimate), MTBF 1 h: sqrt(2 x 60 x 3600) = 657 s.
  JobPolicy p = Started(Cadence(Seconds(3600)));
  JobActions first = p.OnTick(At(seconds(0)));
  ASSERT_NE(FindEvent(first, "cadence"), nullptr);
  EXPECT_NEAR(FindEvent(first, "cadence")->data["interval_seconds"].get<double>(), 657.27, 0.01);
  EXPECT_TRUE(Said(first, "checkpoint interval 657s (start)"));
  EXPECT_EQ(SignalTimes(p, 1, 2000), (std::vector<int>{658, 1316, 1974}));
}

// The job's history in the store sets the MTBF: 3 notices in 9 h with a
// 1 h prior gives (1 + 9) / 4 = 2.5 h, and sqrt(2 x 60 x 9000) = 1039 s.
TEST(JobPolicyResumeTest, TheCadenceLearnsTheMtbfFromTheJobsHistory) {
  RestoredState state = Restored(100, 3);
  state.history = InterruptionHistory{Seconds(9 * 3600.0), 3};
  JobPolicyOptions o = Cadence(Seconds(3600));
  o.checkpoint_signal = SIGUSR1;
  JobPolicy p(o);
  p.OnLeaseAcquired(At(milliseconds(0)));
  JobActions restored = p.OnRestored(At(milliseconds(0)), state);
  EXPECT_TRUE(Said(restored, "3 interruption notice(s) in 9.0 h")) << "the history is logged";
  EXPECT_TRUE(Said(restored, "MTBF 2.5 h"));
  JobActions first = p.OnTick(At(seconds(0)));
  ASSERT_NE(FindEvent(first, "cadence"), nullptr);
  EXPECT_NEAR(FindEvent(first, "cadence")->data["mtbf_seconds"].get<double>(), 9000, 1e-6);
  EXPECT_NEAR(FindEvent(first, "cadence")->data["interval_seconds"].get<double>(), 1039.23, 0.01);
}

TEST(JobPolicyResumeTest, TheMeasuredCostOfARequestSetsTheNextInterval) {
  JobPolicy p = Started(Cadence(Seconds(3600)));
  EXPECT_EQ(SignalTimes(p, 0, 700), (std::vector<int>{658}));
  // The answer, written after the request, is committed 240 s after it.
  const Checkpoint answer = Ckpt(120, seconds(700));
  ASSERT_NE(Find<a::StartUpload>(p.OnCheckpoints(At(seconds(701)), {answer}, {})), nullptr);
  p.OnUploadFinished(At(seconds(898)), {UploadOutcome::Kind::kCommitted, 4, 10, 10, 1, "", 0});
  // sqrt(2 x 240 x 3600) = 1315 s: a change, announced at the next tick.
  JobActions next = p.OnTick(At(seconds(899)));
  ASSERT_NE(FindEvent(next, "cadence"), nullptr);
  EXPECT_NEAR(FindEvent(next, "cadence")->data["cost_seconds"].get<double>(), 240, 1e-9);
  EXPECT_NEAR(FindEvent(next, "cadence")->data["interval_seconds"].get<double>(), 1314.5, 0.1);
}

TEST(JobPolicyResumeTest, ARebalanceRecommendationShortensTheCadenceAtOnce) {
  JobPolicy p = Started(Cadence(Seconds(6 * 3600)));  // Young: 1610 s
  EXPECT_TRUE(SignalTimes(p, 0, 100).empty());
  InterruptionEvent rebalance;
  rebalance.kind = InterruptionEvent::Kind::kRebalance;
  JobActions seen = p.OnInterruption(At(seconds(101)), rebalance, 0);
  const auto* cadence = FindEvent(seen, "cadence");
  ASSERT_NE(cadence, nullptr);
  EXPECT_EQ(cadence->data["why"], "rebalance recommendation");
  EXPECT_NEAR(cadence->data["interval_seconds"].get<double>(), 1609.97 / std::sqrt(10.0), 0.01);
  // Asked again 509 s after the rebalance, long before 1610 s.
  const std::vector<int> times = SignalTimes(p, 102, 1000);
  ASSERT_FALSE(times.empty());
  EXPECT_EQ(times.front(), 101 + 510);
}

}  // namespace
}  // namespace sg::testing
