// The node policy in member mode (agent/run/job_policy.h, options.member;
// docs/design.md §9, "A member's coordination"): the same policy as one
// node's, with the round deciding a trainer's exit, the part to upload and
// the answer to a request. Observations in, actions out, at chosen times.
#include <gtest/gtest.h>
#include <signal.h>

#include "agent/config/exit_codes.h"
#include "agent/run/job_policy.h"
#include "tests/unit/job_actions_support.h"

namespace sg::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
namespace a = job_action;

class MemberPolicyTest : public ::testing::Test {
 protected:
  MemberPolicyTest() {
    options_.checkpoint_signal = SIGUSR1;
    options_.member = true;
    options_.upload_interval = seconds(300);
  }

  static constexpr Clock::WallTime kWall0 = Clock::WallTime(seconds(1'795'000'000));

  PolicyTime At(milliseconds offset) const {
    return {Clock::MonoTime(seconds(1000)) + offset, kWall0 + offset};
  }

  static Checkpoint Ckpt(int64_t step, milliseconds offset) {
    Checkpoint c;
    c.id = "step_" + std::to_string(step);
    c.step = step;
    c.relpaths = {c.id + "/model.pt"};
    c.resume = c.id;
    c.newest_mtime = kWall0 + offset;
    return c;
  }

  static ExitStatus Exited(int code) {
    ExitStatus s;
    s.code = code;
    return s;
  }

  // Joins round `round` as rank 0, restores the part of step 100 and starts
  // the trainer.
  void Join(uint64_t round = 1, milliseconds at = milliseconds(0)) {
    if (!policy_) policy_.emplace(options_);
    ASSERT_EQ(policy_->phase(), JobPhase::kLease);
    policy_->OnRoundJoined(At(at), round, 0);
    ASSERT_EQ(policy_->phase(), JobPhase::kRestore);
    RestoredState restored;
    restored.committed_step = 100;
    JobActions started = policy_->OnRestored(At(at), restored);
    ASSERT_EQ(policy_->phase(), JobPhase::kTraining);
    ASSERT_NE(Find<a::StartTrainer>(started), nullptr);
  }

  // A tick and the listing it asks for.
  JobActions Turn(milliseconds at, const std::vector<Checkpoint>& on_disk) {
    JobActions out = policy_->OnTick(At(at));
    if (Find<a::FindCheckpoints>(out) == nullptr) return out;
    JobActions listed = policy_->OnCheckpoints(At(at), on_disk, std::nullopt);
    out.insert(out.end(), listed.begin(), listed.end());
    return out;
  }

  // The upload in flight commits as snapshot `seq`, and its record is written.
  JobActions Stored(milliseconds at, uint64_t seq, uint64_t round = 1) {
    UploadOutcome done;
    done.seq = seq;
    done.bytes = done.stored_bytes = 1 << 20;
    done.seconds = 1;
    JobActions out = policy_->OnUploadFinished(At(at), done);
    const auto* announce = Find<a::AnnouncePart>(out);
    EXPECT_NE(announce, nullptr);
    if (announce) {
      JobActions more = policy_->OnPartAnnounced(At(at), round, *announce, true);
      out.insert(out.end(), more.begin(), more.end());
    }
    return out;
  }

  static InterruptionEvent Notice(PolicyTime t, std::chrono::seconds left) {
    return SpotNotice(t, left);
  }

  JobPolicyOptions options_;
  std::optional<JobPolicy> policy_;
};

TEST_F(MemberPolicyTest, ACrashEndsTheRoundForEveryNodeInsteadOfRestartingOneTrainer) {
  Join();
  JobActions crashed = policy_->OnTrainerExited(At(seconds(5)), Exited(1));
  const auto* end = Find<a::EndRound>(crashed);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(end->why, "crash");
  const auto* stop = Find<a::StopTrainer>(crashed);
  ASSERT_NE(stop, nullptr);
  EXPECT_TRUE(stop->in_background);  // the beats and the lease go on
  EXPECT_EQ(policy_->phase(), JobPhase::kStopping);
  JobActions left = policy_->OnTrainerStopped(At(seconds(6)));
  EXPECT_NE(Find<a::RoundLeft>(left), nullptr);
  EXPECT_EQ(EventKinds(left), std::vector<std::string>{"round-end"});
  EXPECT_EQ(policy_->phase(), JobPhase::kLease);
  // No restart of its own, whatever the backoff: the next round starts it.
  EXPECT_EQ(Find<a::StartTrainer>(policy_->OnTick(At(seconds(600)))), nullptr);
  EXPECT_FALSE(policy_->exit_code());
}

TEST_F(MemberPolicyTest, AnUnearnedExitZeroEndsTheRoundAsUnearned) {
  Join();
  JobActions out =
      policy_->OnTrainerExited(At(seconds(5)), Exited(0), std::string("wrote no step 1000"));
  const auto* end = Find<a::EndRound>(out);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(end->why, "unearned");
  EXPECT_NE(FindEvent(out, "unearned"), nullptr);
  EXPECT_EQ(Find<a::MarkDone>(out), nullptr);
}

TEST_F(MemberPolicyTest, AFinishedTrainersLastPartGoesUpAndThenTheRankIsDone) {
  Join();
  JobActions finished = policy_->OnTrainerExited(At(seconds(5)), Exited(0));
  EXPECT_NE(FindEvent(finished, "trainer-exit"), nullptr);
  EXPECT_EQ(Find<a::EndRound>(finished), nullptr);
  EXPECT_EQ(policy_->phase(), JobPhase::kTraining);  // the round goes on
  const std::vector<Checkpoint> disk = {Ckpt(200, seconds(4)), Ckpt(100, -seconds(60))};
  JobActions up = Turn(seconds(6), disk);
  const auto* upload = Find<a::StartUpload>(up);
  ASSERT_NE(upload, nullptr);
  EXPECT_EQ(upload->checkpoint.step, 200);
  EXPECT_EQ(Find<a::MarkDone>(up), nullptr);  // not before its part is stored
  Stored(seconds(8), 7);
  JobActions done = Turn(seconds(9), disk);
  const auto* mark = Find<a::MarkDone>(done);
  ASSERT_NE(mark, nullptr);
  EXPECT_EQ(mark->step, 200);
  // Marked once; completion is the group's (the coordinator's marker).
  EXPECT_EQ(Find<a::MarkDone>(Turn(seconds(10), disk)), nullptr);
  EXPECT_EQ(Find<a::WriteCompleteMarker>(done), nullptr);
  EXPECT_FALSE(policy_->exit_code());
}

TEST_F(MemberPolicyTest, AStepAnotherRankAnnouncedIsUploadedBeforeItsOwnNewest) {
  Join();
  RoundNews news;
  news.parts = std::vector<PartRecord>{PartRecord{1, 150, 4, "i-b", 10, 10}};
  policy_->OnRoundRead(At(seconds(1)), news);
  JobActions up = Turn(seconds(2), {Ckpt(200, seconds(1)), Ckpt(150, seconds(0))});
  const auto* upload = Find<a::StartUpload>(up);
  ASSERT_NE(upload, nullptr);
  EXPECT_EQ(upload->checkpoint.step, 150);  // one node's policy would take 200
}

TEST_F(MemberPolicyTest, ANoticeEndsTheRoundAndExits75OnceTheGroupNamesItsAnswer) {
  Join();
  const std::vector<Checkpoint> before = {Ckpt(100, -seconds(60))};
  Turn(seconds(1), before);
  JobActions notice =
      policy_->OnInterruption(At(seconds(10)), Notice(At(seconds(10)), seconds(120)), 1 << 20);
  ASSERT_NE(Find<a::WriteNoticeFile>(notice), nullptr);
  EXPECT_LT(IndexOf<a::WriteNoticeFile>(notice), IndexOf<a::SignalTrainer>(notice));
  const auto* end = Find<a::EndRound>(notice);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(end->why, "notice");
  EXPECT_NE(Find<a::LeaveGroup>(notice), nullptr);  // no next round for this node
  EXPECT_EQ(policy_->phase(), JobPhase::kFinalSnapshot);
  EXPECT_TRUE(policy_->leaving());
  // The request is recorded with the step this rank had when asked.
  JobActions asked = policy_->OnCheckpoints(At(seconds(10)), before, std::nullopt);
  const auto* mark = Find<a::MarkAsked>(asked);
  ASSERT_NE(mark, nullptr);
  EXPECT_EQ(mark->after, 100);
  EXPECT_NE(FindEvent(asked, "checkpoint-request"), nullptr);
  // The trainer's answer goes up at once.
  const std::vector<Checkpoint> answered = {Ckpt(120, seconds(14)), before[0]};
  const JobActions answering = Turn(seconds(15), answered);
  const auto* upload = Find<a::StartUpload>(answering);
  ASSERT_NE(upload, nullptr);
  EXPECT_EQ(upload->checkpoint.step, 120);
  Stored(seconds(20), 9);
  // Its own part stored is not the answer: the group snapshot is.
  EXPECT_EQ(Find<a::StopTrainer>(Turn(seconds(21), answered)), nullptr);
  RoundNews news;
  news.answered = true;
  policy_->OnRoundRead(At(seconds(22)), news);
  JobActions over = Turn(seconds(22), answered);
  EXPECT_NE(Find<a::RemoveNoticeFile>(over), nullptr);
  const auto* answer = FindEvent(over, "checkpoint-answer");
  ASSERT_NE(answer, nullptr);
  EXPECT_EQ(answer->data["answered"], true);
  const auto* stop = Find<a::StopTrainer>(over);
  ASSERT_NE(stop, nullptr);
  EXPECT_FALSE(stop->in_background);
  JobActions exit = policy_->OnTrainerStopped(At(seconds(23)));
  const auto* code = Find<a::Exit>(exit);
  ASSERT_NE(code, nullptr);
  EXPECT_EQ(code->code, kExitInterrupted);
}

TEST_F(MemberPolicyTest, ANoticeWhoseAnswerIsNotNamedByItsDeadlineExits74) {
  Join();
  policy_->OnInterruption(At(seconds(10)), Notice(At(seconds(10)), seconds(30)), 0);
  const std::vector<Checkpoint> disk = {Ckpt(100, -seconds(60))};
  EXPECT_EQ(Find<a::StopTrainer>(Turn(seconds(15), disk)), nullptr);
  // Given up on kGiveUpBeforeStop before the deadline (10 + 30 - 10 s).
  JobActions over = Turn(seconds(31), disk);
  ASSERT_NE(Find<a::StopTrainer>(over), nullptr);
  EXPECT_TRUE(Said(over, "no group snapshot of the answer in time") ||
              Said(over, "saved no checkpoint in time"));
  const JobActions stopped = policy_->OnTrainerStopped(At(seconds(32)));
  const auto* code = Find<a::Exit>(stopped);
  ASSERT_NE(code, nullptr);
  EXPECT_EQ(code->code, kExitNotCommitted);
}

TEST_F(MemberPolicyTest, TheGroupsRequestEndsTheRoundOnceAnsweredAndTheNodeWaitsForTheNext) {
  Join();
  JobActions asked = policy_->OnGroupRequest(At(seconds(5)), At(seconds(105)).mono, "i-b");
  const auto* file = Find<a::WriteNoticeFile>(asked);
  ASSERT_NE(file, nullptr);
  EXPECT_FALSE(file->event);  // a request's file, not a notice's
  EXPECT_EQ(file->round, 1u);
  EXPECT_NE(Find<a::SignalTrainer>(asked), nullptr);
  EXPECT_EQ(Find<a::LeaveGroup>(asked), nullptr);
  EXPECT_FALSE(policy_->leaving());
  RoundNews news;
  news.answered = true;
  policy_->OnRoundRead(At(seconds(8)), news);
  JobActions over = Turn(seconds(8), {Ckpt(100, -seconds(60))});
  const auto* stop = Find<a::StopTrainer>(over);
  ASSERT_NE(stop, nullptr);
  EXPECT_TRUE(stop->in_background);
  JobActions left = policy_->OnTrainerStopped(At(seconds(9)));
  EXPECT_NE(Find<a::RoundLeft>(left), nullptr);
  EXPECT_EQ(Find<a::Exit>(left), nullptr);
  EXPECT_EQ(policy_->phase(), JobPhase::kLease);
  Join(2, seconds(20));  // the next round: its trainer is attempt 2
}

TEST_F(MemberPolicyTest, ANoticeWhileItsPartIsRestoredLeavesTheRoundAsLeftAndExits75) {
  policy_.emplace(options_);
  policy_->OnRoundJoined(At(seconds(0)), 3, 1);
  JobActions out =
      policy_->OnInterruption(At(seconds(1)), Notice(At(seconds(1)), seconds(120)), 0);
  EXPECT_LT(IndexOf<a::LeaveGroup>(out), IndexOf<a::EndRound>(out));
  const auto* end = Find<a::EndRound>(out);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(end->why, "left");
  const auto* code = Find<a::Exit>(out);
  ASSERT_NE(code, nullptr);
  EXPECT_EQ(code->code, kExitInterrupted);
  EXPECT_EQ(Find<a::SignalTrainer>(out), nullptr);  // no trainer yet
}

TEST_F(MemberPolicyTest, AStopSignalEndsTheRoundWithStopAndTheNodeLeaves) {
  options_.stop_timeout = seconds(120);
  Join();
  JobActions out = policy_->OnStopSignal(At(seconds(5)));
  const auto* end = Find<a::EndRound>(out);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(end->why, "stop");
  const auto* file = Find<a::WriteNoticeFile>(out);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->why, "SIGTERM");
  EXPECT_TRUE(policy_->leaving());
  EXPECT_EQ(policy_->phase(), JobPhase::kFinalSnapshot);
}

TEST_F(MemberPolicyTest, ARebalanceAsksTheTrainerAndWritesTheGroupsFlushRecord) {
  Join();
  Turn(seconds(1), {Ckpt(140, seconds(1))});
  InterruptionEvent rebalance;
  rebalance.kind = InterruptionEvent::Kind::kRebalance;
  JobActions out = policy_->OnInterruption(At(seconds(2)), rebalance, 0);
  EXPECT_NE(FindEvent(out, "rebalance"), nullptr);
  EXPECT_NE(Find<a::SignalTrainer>(out), nullptr);
  const auto* flush = Find<a::MarkFlush>(out);
  ASSERT_NE(flush, nullptr);
  EXPECT_EQ(flush->step, 140);
  EXPECT_EQ(policy_->phase(), JobPhase::kTraining);  // the round goes on
  // Its own flush record, read back, asks nothing more.
  RoundNews news;
  news.flushes = {{0, 140}};
  EXPECT_EQ(Find<a::SignalTrainer>(policy_->OnRoundRead(At(seconds(3)), news)), nullptr);
}

TEST_F(MemberPolicyTest, AnotherRanksFlushAsksThisTrainerOnceAndItsNextCheckpointGoesUp) {
  Join();
  RoundNews news;
  news.flushes = {{1, 150}};
  JobActions first = policy_->OnRoundRead(At(seconds(5)), news);
  const auto* ask = Find<a::SignalTrainer>(first);
  ASSERT_NE(ask, nullptr);
  EXPECT_NE(ask->why.find("rank 1"), std::string::npos);
  EXPECT_EQ(Find<a::SignalTrainer>(policy_->OnRoundRead(At(seconds(6)), news)), nullptr);
  // Uploaded at once, long before upload_interval.
  const JobActions next = Turn(seconds(7), {Ckpt(150, seconds(6))});
  const auto* upload = Find<a::StartUpload>(next);
  ASSERT_NE(upload, nullptr);
  EXPECT_EQ(upload->checkpoint.step, 150);
}

TEST_F(MemberPolicyTest, AnUploadOfAnEndedRoundHoldsTheNextRoundsUntilItEndsAndIsDropped) {
  Join();
  RoundNews news;
  news.parts = std::vector<PartRecord>{PartRecord{1, 150, 4, "i-b", 10, 10}};
  policy_->OnRoundRead(At(seconds(1)), news);
  ASSERT_NE(Find<a::StartUpload>(Turn(seconds(2), {Ckpt(150, seconds(1))})), nullptr);
  JobActions left = policy_->OnLeave(At(seconds(3)), "round 1 ended: crash on i-b");
  EXPECT_NE(Find<a::CancelUpload>(left), nullptr);
  policy_->OnTrainerStopped(At(seconds(4)));
  Join(2, seconds(5));
  policy_->OnRoundRead(At(seconds(6)), news);
  // Round 2 wants step 150 too, but the cancelled upload has not ended.
  EXPECT_EQ(Find<a::StartUpload>(Turn(seconds(6), {Ckpt(150, seconds(1))})), nullptr);
  UploadOutcome cancelled;
  cancelled.kind = UploadOutcome::Kind::kFailed;
  cancelled.message = "cancelled";
  JobActions dropped = policy_->OnUploadFinished(At(seconds(7)), cancelled);
  EXPECT_TRUE(Said(dropped, "dropping the result of an upload of round 1"));
  EXPECT_NE(Find<a::StartUpload>(Turn(seconds(8), {Ckpt(150, seconds(1))})), nullptr);
}

}  // namespace
}  // namespace sg::testing
