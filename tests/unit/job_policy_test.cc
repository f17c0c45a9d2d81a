// The job policy (agent/run/job_policy.h) on its own: observations in, actions
// out. No clock, process, file or store: each scenario is a sequence of
// observations at chosen times, and the actions are checked in order.
#include "agent/run/job_policy.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <map>

#include "agent/config/exit_codes.h"
#include "tests/unit/job_actions_support.h"

namespace sg::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
namespace a = job_action;

class JobPolicyTest : public ::testing::Test {
 protected:
  JobPolicyTest() { options_.checkpoint_signal = SIGUSR1; }

  // Both clocks `offset` after the start.
  PolicyTime At(milliseconds offset) const {
    return {Clock::MonoTime(seconds(1000)) + offset, kWall0 + offset};
  }

  // A complete checkpoint at `step`, finished `offset` after the start.
  static Checkpoint Ckpt(int64_t step, milliseconds offset) {
    Checkpoint c;
    c.id = "step_" + std::to_string(step) + ".pt";
    c.step = step;
    c.relpaths = {c.id};
    c.resume = c.id;
    c.newest_mtime = kWall0 + offset;
    return c;
  }

  // Lease, restore (the store holds step 100 when `restored`) and the start.
  void StartTraining(bool restored = true) {
    policy_.emplace(options_);
    ASSERT_EQ(policy_->phase(), JobPhase::kLease);
    policy_->OnLeaseAcquired(At(milliseconds(0)));
    ASSERT_EQ(policy_->phase(), JobPhase::kRestore);
    RestoredState state;
    if (restored) {
      state.committed = CheckpointMark::Of(Ckpt(100, -seconds(600)));
      state.committed_step = 100;
      state.last_seq = 3;
      state.resume = "/ckpt/step_100.pt";
    }
    JobActions started = policy_->OnRestored(At(milliseconds(0)), state);
    ASSERT_EQ(policy_->phase(), JobPhase::kTraining);
    const auto* start = Find<a::StartTrainer>(started);
    ASSERT_NE(start, nullptr);
    EXPECT_EQ(start->attempt, 1);
    EXPECT_FALSE(start->resume_from_newest_local);
    EXPECT_EQ(EventKinds(started), std::vector<std::string>{"start"});
  }

  // The trainer stopped, and nothing new written on the stop signal: the end.
  JobActions StopAndEnd(PolicyTime t, const std::vector<Checkpoint>& on_disk) {
    JobActions stopped = policy_->OnTrainerStopped(t);
    EXPECT_NE(Find<a::FindCheckpoints>(stopped), nullptr);
    JobActions end = policy_->OnCheckpoints(t, on_disk, std::nullopt);
    stopped.insert(stopped.end(), end.begin(), end.end());
    return stopped;
  }

  static InterruptionEvent Notice(PolicyTime t, std::chrono::seconds left) {
    return SpotNotice(t, left);
  }

  static constexpr Clock::WallTime kWall0 = Clock::WallTime(seconds(1'795'000'000));
  JobPolicyOptions options_;
  std::optional<JobPolicy> policy_;
};

TEST_F(JobPolicyTest, ANoticeAsksForACheckpointCommitsItStopsTheTrainerAndExits75) {
  options_.stop_grace = seconds(60);
  StartTraining();
  JobPolicy& p = *policy_;
  JobActions notice =
      p.OnInterruption(At(seconds(10)), Notice(At(seconds(10)), seconds(120)), 100ull << 20);
  EXPECT_EQ(p.phase(), JobPhase::kFinalSnapshot);
  EXPECT_EQ(p.end(), JobEnd::kNotice);
  // systemd hears that the agent is on its way out (docs/agent.md).
  ASSERT_NE(Find<a::Notify>(notice), nullptr);
  EXPECT_EQ(Find<a::Notify>(notice)->state, "STOPPING=1");
  ASSERT_NE(Find<a::WriteNoticeFile>(notice), nullptr);
  EXPECT_LT(IndexOf<a::WriteNoticeFile>(notice), IndexOf<a::SignalTrainer>(notice));
  EXPECT_TRUE(Said(notice, "asking the trainer for a checkpoint (SIGUSR1)"));
  // Nothing but the final snapshot before the trainer is stopped.
  EXPECT_TRUE(EventKinds(notice).empty());

  // The checkpoint on disk is from before the request: keep waiting.
  EXPECT_NE(Find<a::FindCheckpoints>(p.OnTick(At(seconds(11)))), nullptr);
  EXPECT_TRUE(p.OnCheckpoints(At(seconds(11)), {Ckpt(150, seconds(5))}, std::nullopt).empty());
  // The trainer's answer.
  JobActions upload =
      p.OnCheckpoints(At(seconds(14)), {Ckpt(200, seconds(13)), Ckpt(150, seconds(5))}, {});
  const auto* start = Find<a::StartUpload>(upload);
  ASSERT_NE(start, nullptr);
  EXPECT_EQ(start->checkpoint.step, 200);
  EXPECT_TRUE(start->final);
  EXPECT_TRUE(p.OnTick(At(seconds(15))).empty());  // the upload runs

  JobActions committed =
      p.OnUploadFinished(At(seconds(18)), {UploadOutcome::Kind::kCommitted, 7, 1000, 900, 4.0, ""});
  const auto* stop = Find<a::StopTrainer>(committed);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->grace, seconds(60));  // 120 - 8 - 5 s left, capped at stop_grace
  EXPECT_EQ(p.phase(), JobPhase::kStopping);
  EXPECT_TRUE(EventKinds(committed).empty());
  EXPECT_EQ(Find<a::RunRetention>(committed), nullptr);
  ASSERT_TRUE(p.notice_to_commit().has_value());
  EXPECT_DOUBLE_EQ(*p.notice_to_commit(), 8.0);

  JobActions stopped = StopAndEnd(At(seconds(20)), {Ckpt(200, seconds(13))});
  EXPECT_NE(Find<a::CompleteLifecycleHook>(stopped), nullptr);
  EXPECT_EQ(EventKinds(stopped),
            (std::vector<std::string>{"notice", "checkpoint-request", "checkpoint-answer",
                                      "snapshot", "trainer-stop", "stop"}));
  // Written after the trainer stopped, each with the time it happened (the ledger's).
  std::map<std::string, Clock::WallTime> when;
  for (const JobAction& action : stopped) {
    if (const auto* e = std::get_if<a::RecordEvent>(&action); e && e->at) when[e->kind] = *e->at;
  }
  EXPECT_EQ(when["notice"], At(seconds(10)).wall);
  EXPECT_EQ(when["checkpoint-request"], At(seconds(10)).wall);
  EXPECT_EQ(when["checkpoint-answer"], At(seconds(14)).wall);
  EXPECT_EQ(when["snapshot"], At(seconds(18)).wall);
  EXPECT_EQ(when["trainer-stop"], At(seconds(20)).wall);
  EXPECT_EQ(when["stop"], At(seconds(20)).wall);
  EXPECT_NE(Find<a::RunRetention>(stopped), nullptr);
  EXPECT_NE(Find<a::ReleaseLease>(stopped), nullptr);
  ASSERT_TRUE(std::holds_alternative<a::Exit>(stopped.back()));
  EXPECT_EQ(std::get<a::Exit>(stopped.back()).code, kExitInterrupted);
  EXPECT_EQ(p.phase(), JobPhase::kDone);
  EXPECT_EQ(p.committed_step(), 200);
}

TEST_F(JobPolicyTest, ANoticeWithNoTimeForAFreshCheckpointCommitsTheNewestComplete) {
  StartTraining();
  JobPolicy& p = *policy_;
  // 20 s left and 1 GiB to upload at the assumed 50 MiB/s: no time to wait.
  JobActions notice =
      p.OnInterruption(At(seconds(10)), Notice(At(seconds(10)), seconds(20)), 1ull << 30);
  EXPECT_TRUE(Said(notice, "waiting up to 0.0s"));
  ASSERT_NE(Find<a::FindCheckpoints>(p.OnTick(At(milliseconds(10'100)))), nullptr);
  JobActions upload = p.OnCheckpoints(At(milliseconds(10'100)), {Ckpt(150, seconds(5))}, {});
  EXPECT_TRUE(Said(upload, "no new checkpoint in time; committing the newest existing one"));
  const auto* start = Find<a::StartUpload>(upload);
  ASSERT_NE(start, nullptr);
  EXPECT_EQ(start->checkpoint.step, 150);
  JobActions committed = p.OnUploadFinished(
      At(seconds(14)), {UploadOutcome::Kind::kCommitted, 4, 1 << 30, 1 << 30, 3.9, ""});
  // 20 - 4 - 5 s: the trainer gets what is left before the deadline.
  ASSERT_NE(Find<a::StopTrainer>(committed), nullptr);
  EXPECT_EQ(Find<a::StopTrainer>(committed)->grace, seconds(11));
}

TEST_F(JobPolicyTest, WithoutACheckpointSignalTheNoticeFileGetsAQuarterOfTheBudget) {
  options_.checkpoint_signal.reset();
  StartTraining();
  JobPolicy& p = *policy_;
  // 120 s left, 1 MiB: a budget of about 105 s, a quarter of it for the notice file.
  JobActions notice =
      p.OnInterruption(At(seconds(10)), Notice(At(seconds(10)), seconds(120)), 1 << 20);
  EXPECT_EQ(Find<a::SignalTrainer>(notice), nullptr);
  ASSERT_NE(Find<a::WriteNoticeFile>(notice), nullptr);
  EXPECT_TRUE(Said(notice, "waiting up to 26.2s for a checkpoint"));
  // Nothing new yet: no stop signal while the trainer may still answer.
  EXPECT_TRUE(p.OnCheckpoints(At(seconds(20)), {Ckpt(100, -seconds(600))}, {}).empty());
  // It answered the notice file with step 130.
  JobActions upload =
      p.OnCheckpoints(At(seconds(21)), {Ckpt(130, seconds(21)), Ckpt(100, -seconds(600))}, {});
  EXPECT_TRUE(Said(upload, "the trainer wrote checkpoint step_130.pt"));
  ASSERT_NE(Find<a::StartUpload>(upload), nullptr);
  EXPECT_EQ(Find<a::StartUpload>(upload)->checkpoint.step, 130);
}

TEST_F(JobPolicyTest, WithoutAnAnswerToTheNoticeFileTheStopComesAfterTheWindow) {
  options_.checkpoint_signal.reset();
  StartTraining();
  JobPolicy& p = *policy_;
  p.OnInterruption(At(seconds(10)), Notice(At(seconds(10)), seconds(120)), 1 << 20);
  EXPECT_TRUE(p.OnCheckpoints(At(seconds(36)), {Ckpt(100, -seconds(600))}, {}).empty());
  // The window has passed: nothing newer than the store's step 100, stop.
  JobActions nothing = p.OnCheckpoints(At(seconds(37)), {Ckpt(100, -seconds(600))}, {});
  EXPECT_TRUE(Said(nothing, "the newest checkpoint is already committed"));
  ASSERT_NE(Find<a::StopTrainer>(nothing), nullptr);
  JobActions stopped = StopAndEnd(At(seconds(38)), {Ckpt(100, -seconds(600))});
  EXPECT_TRUE(Said(stopped, "nothing new to commit"));
  EXPECT_EQ(std::get<a::Exit>(stopped.back()).code, kExitInterrupted);
  EXPECT_FALSE(p.notice_to_commit().has_value());
}

TEST_F(JobPolicyTest, ACheckpointBeingWrittenAtTheNoticeIsWaitedForWithinTheBudget) {
  options_.checkpoint_signal.reset();
  StartTraining();
  JobPolicy& p = *policy_;
  p.OnInterruption(At(seconds(10)), Notice(At(seconds(10)), seconds(120)), 1 << 20);
  // Past the notice-file window, but step 200 is still being written.
  EXPECT_TRUE(p.OnCheckpoints(At(seconds(60)), {Ckpt(100, -seconds(600))}, {}, true).empty());
  JobActions upload = p.OnCheckpoints(
      At(seconds(70)), {Ckpt(200, seconds(69)), Ckpt(100, -seconds(600))}, {}, false);
  ASSERT_NE(Find<a::StartUpload>(upload), nullptr);
  EXPECT_EQ(Find<a::StartUpload>(upload)->checkpoint.step, 200);
}

TEST_F(JobPolicyTest, AWriteThatOutlastsTheBudgetIsNotWaitedForPastIt) {
  StartTraining();
  JobPolicy& p = *policy_;
  // 60 s left, 1 GiB to upload (20.5 s): 24.5 s for the checkpoint.
  p.OnInterruption(At(seconds(0)), Notice(At(seconds(0)), seconds(60)), 1ull << 30);
  EXPECT_TRUE(p.OnCheckpoints(At(seconds(24)), {Ckpt(150, -seconds(5))}, {}, true).empty());
  JobActions upload = p.OnCheckpoints(At(seconds(25)), {Ckpt(150, -seconds(5))}, {}, true);
  ASSERT_NE(Find<a::StartUpload>(upload), nullptr);
  EXPECT_EQ(Find<a::StartUpload>(upload)->checkpoint.step, 150);
}

TEST_F(JobPolicyTest, ACheckpointWrittenOnTheStopSignalIsUploadedBeforeTheExit) {
  options_.checkpoint_signal.reset();
  options_.settle = seconds(2);
  StartTraining();
  JobPolicy& p = *policy_;
  p.OnInterruption(At(seconds(10)), Notice(At(seconds(10)), seconds(40)), 1 << 20);
  // 40 s left: a window of a quarter of 40 - 15 s. Nothing answers.
  JobActions stop = p.OnCheckpoints(At(seconds(17)), {Ckpt(100, -seconds(600))}, {});
  ASSERT_NE(Find<a::StopTrainer>(stop), nullptr);
  // The trainer saves step 180 on SIGTERM; it settles for 2 s.
  JobActions stopped = p.OnTrainerStopped(At(seconds(18)));
  ASSERT_NE(Find<a::FindCheckpoints>(stopped), nullptr);
  EXPECT_TRUE(p.OnCheckpoints(At(seconds(18)), {Ckpt(100, -seconds(600))}, {}, true).empty());
  EXPECT_NE(Find<a::FindCheckpoints>(p.OnTick(At(seconds(19)))), nullptr);
  JobActions upload = p.OnCheckpoints(
      At(seconds(20)), {Ckpt(180, seconds(18)), Ckpt(100, -seconds(600))}, {}, false);
  EXPECT_TRUE(Said(upload, "on the stop signal"));
  ASSERT_NE(Find<a::StartUpload>(upload), nullptr);
  EXPECT_EQ(Find<a::StartUpload>(upload)->checkpoint.step, 180);
  EXPECT_EQ(Find<a::Exit>(upload), nullptr);
  JobActions end =
      p.OnUploadFinished(At(seconds(22)), {UploadOutcome::Kind::kCommitted, 5, 1, 1, 2, ""});
  EXPECT_EQ(EventKinds(end),
            (std::vector<std::string>{"notice", "checkpoint-request", "checkpoint-answer",
                                      "trainer-stop", "snapshot", "stop"}));
  EXPECT_EQ(std::get<a::Exit>(end.back()).code, kExitInterrupted);
  // Posted 80 s before it was read (40 s of 120 left), committed 12 s later.
  EXPECT_DOUBLE_EQ(*p.notice_to_commit(), 92.0);
  EXPECT_EQ(p.committed_step(), 180);
}

TEST_F(JobPolicyTest, NoticeToCommitCountsFromWhenTheNoticeWasPosted) {
  StartTraining();
  JobPolicy& p = *policy_;
  // Read 30 s after it was posted: 90 s were left.
  JobActions notice =
      p.OnInterruption(At(seconds(40)), Notice(At(seconds(40)), seconds(90)), 1 << 20);
  EXPECT_TRUE(Said(notice, "read 30.0s after it was posted"));
  p.OnCheckpoints(At(seconds(42)), {Ckpt(200, seconds(41))}, {});
  p.OnUploadFinished(At(seconds(44)), {UploadOutcome::Kind::kCommitted, 4, 1, 1, 2, ""});
  EXPECT_DOUBLE_EQ(*p.notice_to_commit(), 34.0);
}

TEST_F(JobPolicyTest, AJobThatNeverCommittedSaysSoNotAlreadyCommitted) {
  options_.checkpoint_signal.reset();
  StartTraining(/*restored=*/false);
  policy_->OnStopSignal(At(seconds(5)));
  JobActions nothing = policy_->OnCheckpoints(At(seconds(5)), {}, {});
  EXPECT_TRUE(Said(nothing, "no complete checkpoint to commit"));
  EXPECT_FALSE(Said(nothing, "already committed"));
}

TEST_F(JobPolicyTest, CrashRestartsFollowTheBackoffTimelineAndThenTheJobFails) {
  options_.restart_max = 2;
  options_.restart_backoff = seconds(10);
  options_.restart_max_backoff = seconds(15);
  StartTraining();
  JobPolicy& p = *policy_;
  JobActions crash1 = p.OnTrainerExited(At(seconds(100)), ExitStatus{.code = 3});
  EXPECT_TRUE(Said(crash1, "the trainer failed (exit code 3); restart 1 of 2 in 10.0s"));
  EXPECT_EQ(EventKinds(crash1), std::vector<std::string>{"crash"});
  EXPECT_EQ(Find<a::StartTrainer>(p.OnTick(At(milliseconds(109'999)))), nullptr);
  JobActions restart1 = p.OnTick(At(seconds(110)));
  const auto* start = Find<a::StartTrainer>(restart1);
  ASSERT_NE(start, nullptr);
  EXPECT_EQ(start->attempt, 2);
  EXPECT_TRUE(start->resume_from_newest_local);

  // Twice the backoff, capped at restart.max_backoff.
  JobActions crash2 = p.OnTrainerExited(At(seconds(200)), ExitStatus{.signal = SIGKILL});
  EXPECT_TRUE(Said(crash2, "restart 2 of 2 in 15.0s"));
  EXPECT_EQ(Find<a::StartTrainer>(p.OnTick(At(milliseconds(214'999)))), nullptr);
  ASSERT_NE(Find<a::StartTrainer>(p.OnTick(At(seconds(215)))), nullptr);

  JobActions crash3 = p.OnTrainerExited(At(seconds(300)), ExitStatus{.code = 1});
  EXPECT_TRUE(Said(crash3, "the job has failed"));
  EXPECT_EQ(EventKinds(crash3), (std::vector<std::string>{"crash", "failed"}));
  EXPECT_NE(Find<a::ReleaseLease>(crash3), nullptr);
  EXPECT_EQ(std::get<a::Exit>(crash3.back()).code, kExitFailure);
  EXPECT_EQ(p.end(), JobEnd::kFailed);
  EXPECT_TRUE(p.OnTick(At(seconds(400))).empty());
}

TEST_F(JobPolicyTest, CompletionUploadsTheLastCheckpointThenWritesTheMarkerAndOnComplete) {
  options_.settle = seconds(2);
  StartTraining();
  JobPolicy& p = *policy_;
  JobActions finished = p.OnTrainerExited(At(seconds(50)), ExitStatus{});
  EXPECT_EQ(p.end(), JobEnd::kComplete);
  EXPECT_EQ(Find<a::StopTrainer>(finished), nullptr);
  // Its last checkpoint may still be settling: not before settle + 200 ms.
  EXPECT_TRUE(p.OnCheckpoints(At(seconds(51)), {Ckpt(500, seconds(49))}, {}).empty());
  JobActions upload = p.OnCheckpoints(At(milliseconds(52'200)), {Ckpt(500, seconds(49))}, {});
  ASSERT_NE(Find<a::StartUpload>(upload), nullptr);
  JobActions done =
      p.OnUploadFinished(At(seconds(55)), {UploadOutcome::Kind::kCommitted, 9, 10, 10, 2.0, ""});
  const auto* marker = Find<a::WriteCompleteMarker>(done);
  ASSERT_NE(marker, nullptr);
  EXPECT_EQ(marker->seq, 9u);
  EXPECT_EQ(marker->step, 500);
  // The marker, then the lease, then on_complete, then the exit.
  EXPECT_LT(IndexOf<a::WriteCompleteMarker>(done), IndexOf<a::ReleaseLease>(done));
  EXPECT_LT(IndexOf<a::ReleaseLease>(done), IndexOf<a::PerformOnComplete>(done));
  EXPECT_EQ(std::get<a::Exit>(done.back()).code, kExitOk);
  EXPECT_EQ(EventKinds(done), std::vector<std::string>{"snapshot"});
}

// Frame reuse shows in the commit line and the snapshot event: new against
// reused stored bytes (issue 21).
TEST_F(JobPolicyTest, TheCommitLineAndEventNameNewAndReusedBytes) {
  options_.settle = seconds(2);
  StartTraining();
  JobPolicy& p = *policy_;
  (void)p.OnTrainerExited(At(seconds(50)), ExitStatus{});
  ASSERT_NE(Find<a::StartUpload>(p.OnCheckpoints(At(seconds(53)), {Ckpt(500, seconds(49))}, {})),
            nullptr);
  UploadOutcome outcome{UploadOutcome::Kind::kCommitted, 9, 10'000, 9'000, 2.0, ""};
  outcome.reused_bytes = 8'500;
  JobActions done = p.OnUploadFinished(At(seconds(55)), outcome);
  EXPECT_TRUE(Said(done, "9000 bytes stored (500 new, 8500 reused)")) << "the commit line";
  const a::RecordEvent* event = nullptr;
  for (const JobAction& action : done) {
    if (const auto* e = std::get_if<a::RecordEvent>(&action); e && e->kind == "snapshot") event = e;
  }
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->data["new_bytes"], 500);
  EXPECT_EQ(event->data["reused_bytes"], 8500);
}

TEST_F(JobPolicyTest, CompletionWithNothingNewMarksTheRestoredSnapshot) {
  StartTraining();
  JobPolicy& p = *policy_;
  p.OnTrainerExited(At(seconds(50)), ExitStatus{});
  JobActions done = p.OnCheckpoints(At(seconds(60)), {Ckpt(100, -seconds(600))}, {});
  const auto* marker = Find<a::WriteCompleteMarker>(done);
  ASSERT_NE(marker, nullptr);
  EXPECT_EQ(marker->seq, 3u);
  EXPECT_EQ(marker->step, 100);
}

TEST_F(JobPolicyTest, ALostLeaseCommitsNothingMoreAndExits4WithoutReleasing) {
  StartTraining();
  JobPolicy& p = *policy_;
  ASSERT_NE(Find<a::FindCheckpoints>(p.OnTick(At(seconds(300)))), nullptr);
  ASSERT_NE(Find<a::StartUpload>(p.OnCheckpoints(At(seconds(300)), {Ckpt(150, seconds(250))}, {})),
            nullptr);
  JobActions fenced = p.OnFenced(At(seconds(301)), "the lease is held by i-2");
  EXPECT_TRUE(Said(fenced, "FENCED: the lease is held by i-2"));
  EXPECT_NE(Find<a::CancelUpload>(fenced), nullptr);
  ASSERT_NE(Find<a::StopTrainer>(fenced), nullptr);
  EXPECT_EQ(Find<a::StopTrainer>(fenced)->grace, seconds(10));
  // The upload that was in flight reports in: nothing follows from it.
  EXPECT_TRUE(
      p.OnUploadFinished(At(seconds(302)), {UploadOutcome::Kind::kCommitted, 4, 1, 1, 1.0, ""})
          .empty());
  JobActions stopped = p.OnTrainerStopped(At(seconds(303)));
  EXPECT_EQ(EventKinds(stopped), (std::vector<std::string>{"trainer-stop", "fenced"}));
  EXPECT_EQ(Find<a::ReleaseLease>(stopped), nullptr);
  EXPECT_EQ(std::get<a::Exit>(stopped.back()).code, kExitFenced);
  // Done: no observation leads to an upload any more.
  EXPECT_TRUE(p.OnTick(At(seconds(900))).empty());
  EXPECT_TRUE(p.OnCheckpoints(At(seconds(900)), {Ckpt(300, seconds(800))}, {}).empty());
  EXPECT_TRUE(
      p.OnInterruption(At(seconds(900)), Notice(At(seconds(900)), seconds(120)), 0).empty());
}

TEST_F(JobPolicyTest, AFencedFinalUploadEndsTheNoticeWithExit4) {
  StartTraining();
  JobPolicy& p = *policy_;
  p.OnInterruption(At(seconds(10)), Notice(At(seconds(10)), seconds(20)), 1ull << 30);
  ASSERT_NE(Find<a::StartUpload>(p.OnCheckpoints(At(seconds(10)), {Ckpt(150, seconds(5))}, {})),
            nullptr);
  JobActions fenced = p.OnUploadFinished(
      At(seconds(12)), {UploadOutcome::Kind::kFenced, 0, 0, 0, 2, "generation 2 is fenced"});
  ASSERT_NE(Find<a::StopTrainer>(fenced), nullptr);
  JobActions stopped = p.OnTrainerStopped(At(seconds(13)));
  EXPECT_EQ(std::get<a::Exit>(stopped.back()).code, kExitFenced);
  EXPECT_EQ(Find<a::ReleaseLease>(stopped), nullptr);
}

TEST_F(JobPolicyTest, SigtermTakesALastSnapshotStopsTheTrainerAndExits75) {
  options_.stop_grace = seconds(30);
  StartTraining();
  JobPolicy& p = *policy_;
  JobActions stop = p.OnStopSignal(At(seconds(10)));
  EXPECT_EQ(p.end(), JobEnd::kSignal);
  ASSERT_FALSE(stop.empty());
  EXPECT_EQ(std::get<a::Notify>(stop.front()).state, "STOPPING=1");
  EXPECT_NE(Find<a::SignalTrainer>(stop), nullptr);
  // A second signal changes nothing.
  EXPECT_TRUE(p.OnStopSignal(At(seconds(11))).empty());
  // Waits for the answer up to stop_grace.
  EXPECT_TRUE(p.OnCheckpoints(At(seconds(39)), {}, {}).empty());
  JobActions gave_up = p.OnCheckpoints(At(seconds(40)), {Ckpt(150, seconds(5))}, {});
  ASSERT_NE(Find<a::StartUpload>(gave_up), nullptr);
  JobActions committed =
      p.OnUploadFinished(At(seconds(41)), {UploadOutcome::Kind::kCommitted, 5, 1, 1, 1, ""});
  EXPECT_EQ(Find<a::StopTrainer>(committed)->grace, seconds(30));
  JobActions stopped = StopAndEnd(At(seconds(42)), {Ckpt(150, seconds(5))});
  EXPECT_EQ(EventKinds(stopped),
            (std::vector<std::string>{"checkpoint-request", "checkpoint-answer", "snapshot",
                                      "trainer-stop", "stop"}));
  // Stopped before completion: an engine must retry it, so never 0.
  EXPECT_EQ(std::get<a::Exit>(stopped.back()).code, kExitInterrupted);
  EXPECT_EQ(Find<a::CompleteLifecycleHook>(stopped), nullptr);
}

TEST_F(JobPolicyTest, ARebalanceRecommendationAsksForACheckpointAndUploadsItAtOnce) {
  options_.upload_interval = seconds(600);
  StartTraining();
  JobPolicy& p = *policy_;
  EXPECT_EQ(Find<a::FindCheckpoints>(p.OnTick(At(seconds(5)))), nullptr);  // not due
  InterruptionEvent rebalance;
  rebalance.kind = InterruptionEvent::Kind::kRebalance;
  rebalance.action = "rebalance";
  JobActions seen = p.OnInterruption(At(seconds(6)), rebalance, 0);
  EXPECT_EQ(EventKinds(seen), std::vector<std::string>{"rebalance"});
  EXPECT_NE(Find<a::SignalTrainer>(seen), nullptr);
  EXPECT_EQ(p.phase(), JobPhase::kTraining);  // not an ending
  ASSERT_NE(Find<a::FindCheckpoints>(p.OnTick(At(seconds(6)))), nullptr);
  JobActions upload = p.OnCheckpoints(At(seconds(6)), {Ckpt(120, seconds(6))}, {});
  ASSERT_NE(Find<a::StartUpload>(upload), nullptr);
  EXPECT_FALSE(Find<a::StartUpload>(upload)->final);
}

TEST_F(JobPolicyTest, ARebalanceIsOnlyRecordedWhenTheConfigSaysSo) {
  options_.upload_interval = seconds(600);
  options_.snapshot_on_rebalance = false;
  StartTraining();
  JobPolicy& p = *policy_;
  InterruptionEvent rebalance;
  rebalance.kind = InterruptionEvent::Kind::kRebalance;
  JobActions seen = p.OnInterruption(At(seconds(6)), rebalance, 0);
  EXPECT_EQ(EventKinds(seen), std::vector<std::string>{"rebalance"});
  EXPECT_EQ(Find<a::SignalTrainer>(seen), nullptr);
  EXPECT_EQ(Find<a::FindCheckpoints>(p.OnTick(At(seconds(6)))), nullptr);
}

TEST_F(JobPolicyTest, AFinalUploadThatFailsIsTriedAgainWhileTimeIsLeft) {
  StartTraining();
  JobPolicy& p = *policy_;
  p.OnInterruption(At(seconds(10)), Notice(At(seconds(10)), seconds(120)), 1ull << 30);
  JobActions first = p.OnCheckpoints(At(seconds(12)), {Ckpt(200, seconds(11))}, {});
  ASSERT_NE(Find<a::StartUpload>(first), nullptr);
  JobActions failed = p.OnUploadFinished(
      At(seconds(20)), {UploadOutcome::Kind::kFailed, 0, 0, 0, 8, "503 SlowDown, 5 tries"});
  EXPECT_TRUE(Said(failed, "the final snapshot failed: 503 SlowDown"));
  EXPECT_TRUE(Said(failed, "trying the final snapshot again (2 of 3)"));
  EXPECT_EQ(Find<a::StopTrainer>(failed), nullptr);
  ASSERT_NE(Find<a::FindCheckpoints>(p.OnTick(At(seconds(21)))), nullptr);
  JobActions second = p.OnCheckpoints(At(seconds(21)), {Ckpt(200, seconds(11))}, {});
  ASSERT_NE(Find<a::StartUpload>(second), nullptr);
  JobActions committed =
      p.OnUploadFinished(At(seconds(30)), {UploadOutcome::Kind::kCommitted, 8, 1, 1, 9, ""});
  ASSERT_NE(Find<a::StopTrainer>(committed), nullptr);
  EXPECT_DOUBLE_EQ(*p.notice_to_commit(), 20.0);
  JobActions stopped = StopAndEnd(At(seconds(31)), {Ckpt(200, seconds(11))});
  EXPECT_EQ(EventKinds(stopped),
            (std::vector<std::string>{"notice", "checkpoint-request", "checkpoint-answer",
                                      "snapshot", "trainer-stop", "stop"}));
  EXPECT_EQ(std::get<a::Exit>(stopped.back()).code, kExitInterrupted);
}

TEST_F(JobPolicyTest, AFinalUploadThatKeepsFailingStillStopsTheTrainerBeforeTheDeadline) {
  StartTraining();
  JobPolicy& p = *policy_;
  p.OnInterruption(At(seconds(0)), Notice(At(seconds(0)), seconds(60)), 1ull << 30);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const PolicyTime t = At(seconds(attempt * 5));
    ASSERT_NE(Find<a::StartUpload>(p.OnCheckpoints(t, {Ckpt(200, seconds(1))}, {})), nullptr);
    JobActions failed =
        p.OnUploadFinished(At(seconds(attempt * 5 + 1)),
                           {UploadOutcome::Kind::kFailed, 0, 0, 0, 1, "connection refused"});
    EXPECT_EQ(Find<a::StopTrainer>(failed) != nullptr, attempt == 3) << attempt;
  }
  JobActions stopped = StopAndEnd(At(seconds(17)), {Ckpt(200, seconds(1))});
  // Step 200 is newer than the store's step 100 and could not be committed.
  EXPECT_TRUE(Said(stopped, "the newest checkpoint could not be committed"));
  EXPECT_EQ(std::get<a::Exit>(stopped.back()).code, kExitNotCommitted);
  EXPECT_FALSE(p.notice_to_commit().has_value());
}

TEST_F(JobPolicyTest, SigtermWhoseFinalSnapshotCannotBeCommittedExits74NeverZero) {
  options_.checkpoint_signal.reset();
  StartTraining();
  JobPolicy& p = *policy_;
  p.OnStopSignal(At(seconds(5)));
  bool stopping = false;
  for (int attempt = 1; attempt <= 3 && !stopping; ++attempt) {
    const PolicyTime t = At(seconds(5 + attempt * 2));
    ASSERT_NE(Find<a::StartUpload>(p.OnCheckpoints(t, {Ckpt(200, seconds(1))}, {})), nullptr);
    JobActions failed =
        p.OnUploadFinished(At(seconds(6 + attempt * 2)),
                           {UploadOutcome::Kind::kFailed, 0, 0, 0, 1, "connection refused"});
    stopping = Find<a::StopTrainer>(failed) != nullptr;
  }
  ASSERT_TRUE(stopping);
  JobActions stopped = StopAndEnd(At(seconds(13)), {Ckpt(200, seconds(1))});
  EXPECT_EQ(std::get<a::Exit>(stopped.back()).code, kExitNotCommitted);
}

TEST_F(JobPolicyTest, AFinalUploadThatHangsIsGivenUpInTimeToStopTheTrainer) {
  StartTraining();
  JobPolicy& p = *policy_;
  // Deadline at 130 s.
  p.OnInterruption(At(seconds(10)), Notice(At(seconds(10)), seconds(120)), 1 << 20);
  ASSERT_NE(Find<a::StartUpload>(p.OnCheckpoints(At(seconds(12)), {Ckpt(200, seconds(11))}, {})),
            nullptr);
  EXPECT_TRUE(p.OnTick(At(milliseconds(119'999))).empty());
  JobActions gave_up = p.OnTick(At(seconds(120)));
  EXPECT_TRUE(Said(gave_up, "did not finish before the deadline"));
  EXPECT_NE(Find<a::CancelUpload>(gave_up), nullptr);
  ASSERT_NE(Find<a::StopTrainer>(gave_up), nullptr);
  EXPECT_EQ(Find<a::StopTrainer>(gave_up)->grace, seconds(5));
  // No second upload of what was given up on, and the exit says so.
  JobActions stopped = StopAndEnd(At(seconds(121)), {Ckpt(200, seconds(11))});
  EXPECT_EQ(Find<a::StartUpload>(stopped), nullptr);
  EXPECT_EQ(std::get<a::Exit>(stopped.back()).code, kExitNotCommitted);
  // Its late answer changes nothing.
  EXPECT_TRUE(
      p.OnUploadFinished(At(seconds(125)), {UploadOutcome::Kind::kCommitted, 9, 1, 1, 1, ""})
          .empty());
}

// SIGTERM has a deadline too: the engine's kill, stop_timeout after it. A
// final upload that hangs is given up on in time to stop the trainer.
TEST_F(JobPolicyTest, OnSigtermAFinalUploadThatHangsIsGivenUpBeforeTheStopTimeout) {
  options_.stop_timeout = seconds(90);
  StartTraining();
  JobPolicy& p = *policy_;
  p.OnStopSignal(At(seconds(10)));  // the kill comes at 100 s
  ASSERT_EQ(p.deadline(), At(seconds(100)).mono);
  ASSERT_NE(Find<a::StartUpload>(p.OnCheckpoints(At(seconds(12)), {Ckpt(200, seconds(11))}, {})),
            nullptr);
  EXPECT_TRUE(p.OnTick(At(milliseconds(89'999))).empty());
  JobActions gave_up = p.OnTick(At(seconds(90)));
  EXPECT_TRUE(Said(gave_up, "did not finish before the deadline"));
  EXPECT_NE(Find<a::CancelUpload>(gave_up), nullptr);
  ASSERT_NE(Find<a::StopTrainer>(gave_up), nullptr);
  EXPECT_EQ(Find<a::StopTrainer>(gave_up)->grace, seconds(5));
  JobActions stopped = StopAndEnd(At(seconds(91)), {Ckpt(200, seconds(11))});
  EXPECT_EQ(Find<a::StartUpload>(stopped), nullptr);
  EXPECT_EQ(std::get<a::Exit>(stopped.back()).code, kExitNotCommitted);
}

// A short stop_timeout shortens the wait for the trainer's answer too.
TEST_F(JobPolicyTest, OnSigtermTheWaitForTheAnswerFitsTheStopTimeout) {
  options_.stop_timeout = seconds(20);
  StartTraining();
  JobPolicy& p = *policy_;
  p.OnStopSignal(At(seconds(10)));
  EXPECT_TRUE(p.OnCheckpoints(At(milliseconds(14'999)), {}, {}).empty());
  JobActions decided = p.OnCheckpoints(At(seconds(15)), {Ckpt(150, seconds(5))}, {});
  ASSERT_NE(Find<a::StartUpload>(decided), nullptr);
  JobActions committed =
      p.OnUploadFinished(At(seconds(16)), {UploadOutcome::Kind::kCommitted, 5, 1, 1, 1, ""});
  // 14 s to the kill, less 5 s in hand.
  ASSERT_NE(Find<a::StopTrainer>(committed), nullptr);
  EXPECT_EQ(Find<a::StopTrainer>(committed)->grace, seconds(9));
}

TEST_F(JobPolicyTest, AFinishedJobWhoseLastUploadFailsIsNotMarkedCompleteAndExitsRetryable) {
  StartTraining();
  JobPolicy& p = *policy_;
  p.OnTrainerExited(At(seconds(0)), ExitStatus{});
  for (int attempt = 1; attempt <= 3; ++attempt) {
    ASSERT_NE(Find<a::StartUpload>(p.OnCheckpoints(At(seconds(attempt * 5)), {Ckpt(900, {})}, {})),
              nullptr);
    JobActions failed = p.OnUploadFinished(At(seconds(attempt * 5 + 1)),
                                           {UploadOutcome::Kind::kFailed, 0, 0, 0, 1, "denied"});
    if (attempt < 3) continue;
    EXPECT_EQ(Find<a::WriteCompleteMarker>(failed), nullptr);
    EXPECT_EQ(Find<a::PerformOnComplete>(failed), nullptr);
    // The trial is not lost: an engine retries 74 (docs/design.md §2).
    EXPECT_EQ(std::get<a::Exit>(failed.back()).code, kExitNotCommitted);
  }
}

TEST_F(JobPolicyTest, AFinishedJobsLastUploadIsTriedAgainForStopTimeoutNotStopGrace) {
  options_.stop_grace = seconds(10);
  options_.stop_timeout = seconds(120);
  StartTraining();
  JobPolicy& p = *policy_;
  p.OnTrainerExited(At(seconds(0)), ExitStatus{});
  ASSERT_NE(Find<a::StartUpload>(p.OnCheckpoints(At(seconds(5)), {Ckpt(900, {})}, {})), nullptr);
  // The store's own retries took 60 s: past stop_grace, within stop_timeout.
  JobActions failed = p.OnUploadFinished(At(seconds(65)),
                                         {UploadOutcome::Kind::kFailed, 0, 0, 0, 1, "refused"});
  EXPECT_EQ(Find<a::Exit>(failed), nullptr) << "tried again";
  ASSERT_NE(Find<a::StartUpload>(p.OnCheckpoints(At(seconds(66)), {Ckpt(900, {})}, {})), nullptr);
  JobActions committed =
      p.OnUploadFinished(At(seconds(80)), {UploadOutcome::Kind::kCommitted, 7, 1, 1, 1, ""});
  ASSERT_NE(Find<a::Exit>(committed), nullptr);
  EXPECT_EQ(Find<a::Exit>(committed)->code, kExitOk);
}

TEST_F(JobPolicyTest, ANoticeCancelsThePeriodicUploadAndWaitsForItToEnd) {
  StartTraining();
  JobPolicy& p = *policy_;
  ASSERT_NE(Find<a::FindCheckpoints>(p.OnTick(At(seconds(300)))), nullptr);
  ASSERT_NE(Find<a::StartUpload>(p.OnCheckpoints(At(seconds(300)), {Ckpt(150, seconds(250))}, {})),
            nullptr);
  JobActions notice =
      p.OnInterruption(At(seconds(301)), Notice(At(seconds(301)), seconds(120)), 1 << 20);
  EXPECT_LT(IndexOf<a::CancelUpload>(notice), IndexOf<a::SignalTrainer>(notice));
  // Nothing new starts while the cancelled upload is still in flight.
  EXPECT_EQ(Find<a::FindCheckpoints>(p.OnTick(At(seconds(302)))), nullptr);
  p.OnUploadFinished(At(seconds(303)),
                     {UploadOutcome::Kind::kNotCommitted, 0, 0, 0, 3, "cancelled"});
  ASSERT_NE(Find<a::FindCheckpoints>(p.OnTick(At(seconds(303)))), nullptr);
  JobActions final_upload =
      p.OnCheckpoints(At(seconds(305)), {Ckpt(200, seconds(304)), Ckpt(150, seconds(250))}, {});
  ASSERT_NE(Find<a::StartUpload>(final_upload), nullptr);
  EXPECT_EQ(Find<a::StartUpload>(final_upload)->checkpoint.step, 200);
}

TEST_F(JobPolicyTest, ATrainerThatDiesDuringTheNoticeWaitEndsTheWaitOnceItsFilesSettle) {
  options_.settle = seconds(2);
  StartTraining();
  JobPolicy& p = *policy_;
  p.OnInterruption(At(seconds(10)), Notice(At(seconds(10)), seconds(120)), 1 << 20);
  // Killed by the checkpoint signal it has no handler for.
  JobActions died = p.OnTrainerExited(At(seconds(11)), ExitStatus{.signal = SIGUSR1});
  EXPECT_TRUE(Said(died, "the trainer ended (killed by SIGUSR1) while the job was ending"));
  EXPECT_TRUE(EventKinds(died).empty());
  EXPECT_TRUE(p.OnCheckpoints(At(seconds(12)), {Ckpt(150, seconds(5))}, {}).empty());
  // Not the whole 100 s budget: settle + 200 ms after the death.
  JobActions upload = p.OnCheckpoints(At(milliseconds(13'200)), {Ckpt(150, seconds(5))}, {});
  ASSERT_NE(Find<a::StartUpload>(upload), nullptr);
}

TEST_F(JobPolicyTest, PeriodicUploadsFollowTheIntervalAndSkipWhatIsCommitted) {
  options_.upload_interval = seconds(60);
  StartTraining();
  JobPolicy& p = *policy_;
  EXPECT_EQ(Find<a::FindCheckpoints>(p.OnTick(At(seconds(59)))), nullptr);
  ASSERT_NE(Find<a::FindCheckpoints>(p.OnTick(At(seconds(60)))), nullptr);
  // Only the restored step: look again in a second.
  EXPECT_TRUE(p.OnCheckpoints(At(seconds(60)), {Ckpt(100, -seconds(600))}, {}).empty());
  EXPECT_EQ(Find<a::FindCheckpoints>(p.OnTick(At(milliseconds(60'999)))), nullptr);
  ASSERT_NE(Find<a::FindCheckpoints>(p.OnTick(At(seconds(61)))), nullptr);
  ASSERT_NE(Find<a::StartUpload>(p.OnCheckpoints(At(seconds(61)), {Ckpt(110, seconds(61))}, {})),
            nullptr);
  JobActions committed =
      p.OnUploadFinished(At(seconds(63)), {UploadOutcome::Kind::kCommitted, 4, 1, 1, 2, ""});
  EXPECT_EQ(EventKinds(committed), std::vector<std::string>{"snapshot"});
  EXPECT_NE(Find<a::RunRetention>(committed), nullptr);
  // The next look is an interval after the last upload started.
  EXPECT_EQ(Find<a::FindCheckpoints>(p.OnTick(At(seconds(120)))), nullptr);
  ASSERT_NE(Find<a::FindCheckpoints>(p.OnTick(At(seconds(121)))), nullptr);
  EXPECT_TRUE(p.OnCheckpoints(At(seconds(121)), {Ckpt(110, seconds(61))}, {}).empty());
}

TEST_F(JobPolicyTest, AnUploadThatSawAFileChangeIsRetriedSoon) {
  options_.upload_interval = seconds(60);
  StartTraining();
  JobPolicy& p = *policy_;
  p.OnTick(At(seconds(60)));
  p.OnCheckpoints(At(seconds(60)), {Ckpt(110, seconds(59))}, {});
  JobActions changed = p.OnUploadFinished(
      At(seconds(61)), {UploadOutcome::Kind::kNotCommitted, 0, 0, 0, 1, "step_110.pt changed"});
  EXPECT_TRUE(Said(changed, "not committed: step_110.pt changed"));
  EXPECT_EQ(Find<a::FindCheckpoints>(p.OnTick(At(milliseconds(65'999)))), nullptr);
  EXPECT_NE(Find<a::FindCheckpoints>(p.OnTick(At(seconds(66)))), nullptr);
}

TEST_F(JobPolicyTest, TheCheckpointIntervalSignalsTheTrainer) {
  options_.checkpoint_interval = seconds(30);
  StartTraining();
  JobPolicy& p = *policy_;
  EXPECT_EQ(Find<a::SignalTrainer>(p.OnTick(At(seconds(29)))), nullptr);
  EXPECT_NE(Find<a::SignalTrainer>(p.OnTick(At(seconds(30)))), nullptr);
  EXPECT_EQ(Find<a::SignalTrainer>(p.OnTick(At(seconds(31)))), nullptr);
  EXPECT_NE(Find<a::SignalTrainer>(p.OnTick(At(seconds(60)))), nullptr);
}

TEST_F(JobPolicyTest, ATrainerThatCannotStartFailsTheJobAndReleasesTheLease) {
  StartTraining();
  JobActions failed = policy_->OnTrainerStartFailed(At(seconds(1)), "no-such-trainer: not found");
  EXPECT_TRUE(Said(failed, "no-such-trainer: not found"));
  EXPECT_NE(Find<a::ReleaseLease>(failed), nullptr);
  EXPECT_EQ(std::get<a::Exit>(failed.back()).code, kExitFailure);
}

TEST_F(JobPolicyTest, ALocalCheckpointTheStoreLacksIsUploadedFirst) {
  options_.upload_interval = seconds(600);
  policy_.emplace(options_);
  policy_->OnLeaseAcquired(At(seconds(0)));
  RestoredState state;
  state.upload_first = true;
  policy_->OnRestored(At(seconds(0)), state);
  EXPECT_NE(Find<a::FindCheckpoints>(policy_->OnTick(At(seconds(0)))), nullptr);
}

}  // namespace
}  // namespace sg::testing
