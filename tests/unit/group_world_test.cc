// Group behaviours on the fake multi-node world (tests/support/fake_group_world.h):
// real group agents, one in-memory store, one fake clock, fake trainers that
// step together. No process, socket or sleep: each test runs minutes of the
// group's time in milliseconds, and the same way on every run.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>

#include "agent/exit_codes.h"
#include "agent/group_store.h"
#include "agent/store_layout.h"
#include "common/files.h"
#include "tests/support/fake_group_world.h"

namespace sg::testing {
namespace {

using namespace std::chrono_literals;

// The finals an uninterrupted run of `nodes` ranks ends with, sorted.
std::vector<std::string> ExpectedFinals(int nodes, int steps) {
  std::vector<std::string> out;
  for (int r = 0; r < nodes; ++r) {
    out.push_back(std::to_string(r) + " " + std::to_string(steps) + " " +
                  std::to_string(ExpectedTotal(r, steps)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Why `round` ended first ("" while it has not; retention removes the
// records of old rounds, so tests read this while the round is recent).
std::string FirstEnd(FakeGroupWorld& w, uint64_t round) {
  const std::vector<std::string> reasons = w.EndReasons(round);
  return reasons.empty() ? "" : reasons.front();
}

std::vector<std::string> Finals(FakeGroupWorld& w, int nodes) {
  std::vector<std::string> out;
  for (int s = 0; s < nodes; ++s) out.push_back(w.node(s).final.value_or("(none)"));
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GroupWorld, EveryNodeCompletesTheJobAndExitsZero) {
  FakeGroupWorld w(2);
  w.trainer.steps = 20;
  w.StartAll();
  ASSERT_TRUE(w.RunUntilExited(120s));
  EXPECT_EQ(w.node(0).result.exit_code, kExitOk);
  EXPECT_EQ(w.node(1).result.exit_code, kExitOk);
  EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 20));
  EXPECT_TRUE(w.store.Head(CompleteKey("job")).ok());
  ASSERT_FALSE(w.GroupSeqs().empty());
  EXPECT_EQ(w.NewestGroupStep(), 20);
}

TEST(GroupWorld, ANoticeCommitsTheGroupAndAReplacementResumesItToTheSameResult) {
  FakeGroupWorld w(2);
  w.trainer.steps = 60;
  w.StartAll();
  w.At(6s, [&] { w.node(1).imds->PostNotice(120s); });
  ASSERT_TRUE(w.RunUntilExited(120s, {1}));
  EXPECT_EQ(w.node(1).result.exit_code, kExitInterrupted);
  const std::optional<int64_t> saved = w.NewestGroupStep();
  ASSERT_TRUE(saved.has_value());
  EXPECT_GT(*saved, 0);
  EXPECT_LT(*saved, 60);
  // The noticed node's trainer was asked for a checkpoint, then stopped.
  EXPECT_EQ(w.node(1).signals.front(), SIGUSR1);
  // The Auto Scaling group replaces the instance.
  w.Start(1);
  ASSERT_TRUE(w.RunUntilExited(300s));
  EXPECT_EQ(w.node(0).result.exit_code, kExitOk);
  EXPECT_EQ(w.node(1).result.exit_code, kExitOk);
  EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 60));
  // The replacement resumed from the group snapshot, not from step 0.
  ASSERT_FALSE(w.node(1).launches.empty());
  EXPECT_FALSE(w.node(1).launches.front().resume.empty());
}

// Every group snapshot in the store is whole: one part per rank, each of
// the same step and readable, with the content that rank saved at that step.
void ExpectWholeGroupSnapshots(FakeGroupWorld& w, int nodes) {
  auto groups = GroupStore(w.store, "job").Groups();
  ASSERT_TRUE(groups.ok()) << groups.status().ToString();
  for (const GroupCommit& g : *groups) {
    ASSERT_EQ(static_cast<int>(g.parts.size()), nodes) << "group snapshot " << g.seq;
    for (int rank = 0; rank < nodes; ++rank) {
      EXPECT_EQ(g.parts[rank].rank, rank);
      EXPECT_EQ(g.parts[rank].step, g.step) << "group snapshot " << g.seq << " rank " << rank;
      EXPECT_TRUE(w.store.Head(ManifestKey(PartJob("job", rank), g.parts[rank].seq)).ok())
          << "group snapshot " << g.seq << " names rank " << rank << "'s part "
          << g.parts[rank].seq << ", which is not in the store";
    }
  }
}

TEST(GroupWorld, ACrashOnOneNodeEndsTheRoundAndTheNextResumesFromTheGroupSnapshot) {
  FakeGroupWorld w(3);
  w.trainer.steps = 30;
  w.trainer.fail_at = 17;
  w.trainer.fail_rank = 1;
  w.trainer.fail_once = true;
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return !FirstEnd(w, 1).empty(); }, 60s));
  EXPECT_EQ(FirstEnd(w, 1), "crash");
  const std::optional<int64_t> committed = w.NewestGroupStep();
  ASSERT_TRUE(committed.has_value());
  ASSERT_TRUE(w.RunUntilExited(300s));
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(w.node(s).result.exit_code, kExitOk) << s;
    // Round 1 fresh, round 2 from the newest group snapshot when round 1 ended.
    ASSERT_EQ(w.node(s).launches.size(), 2u) << s;
    EXPECT_TRUE(w.node(s).launches[0].resume.empty());
    EXPECT_NE(w.node(s).launches[1].resume.find("step_" + std::to_string(*committed) + ".pt"),
              std::string::npos)
        << w.node(s).launches[1].resume;
  }
  EXPECT_EQ(Finals(w, 3), ExpectedFinals(3, 30));
  ExpectWholeGroupSnapshots(w, 3);
}

TEST(GroupWorld, ATrainerThatAlwaysCrashesFailsTheJobOnEveryNodeAfterRestartMax) {
  FakeGroupWorld w(2);
  w.trainer.fail_at = 3;
  w.StartAll();
  ASSERT_TRUE(w.RunUntilExited(300s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).result.exit_code, kExitFailure) << s;
  // restart.max is 2: rounds 1, 2 and 3 crashed, and no fourth was planned.
  EXPECT_EQ(w.NewestRound(), 3u);
  auto failed = GroupStore(w.store, "job").Failed();
  ASSERT_TRUE(failed.ok() && failed->has_value());
  EXPECT_NE((*failed)->why.find("3 rounds in a row"), std::string::npos) << (*failed)->why;
  // A node that boots into the failed job does not start it again.
  w.Start(0);
  ASSERT_TRUE(w.RunUntilExited(60s, {0}));
  EXPECT_EQ(w.node(0).result.exit_code, kExitFailure);
  EXPECT_TRUE(w.node(0).launches.empty());
}

TEST(GroupWorld, AGroupSnapshotOfAnotherNodeCountIsRefusedAtTheStart) {
  FakeGroupWorld w(3);
  GroupCommit g;
  g.seq = 1;
  g.round = 1;
  g.nodes = 2;
  g.step = 10;
  g.generation = 1;
  g.created = "2026-11-27T00:00:00Z";
  for (int rank : {0, 1}) g.parts.push_back(PartRecord{rank, 10, 1, "i-old", 100, 50});
  ASSERT_TRUE(GroupStore(w.store, "job").CommitGroup(g).ok());
  w.StartAll();
  // The coordinator refuses (exit 2), and so does each node that takes the lease after it.
  ASSERT_TRUE(w.RunUntilExited(120s));
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(w.node(s).result.exit_code, kExitUsage) << s;
    EXPECT_TRUE(w.node(s).launches.empty()) << "nothing started fresh";
  }
  EXPECT_EQ(w.NewestRound(), 0u);
}

TEST(GroupWorld, AMemberWhoseSettingsDifferIsRefusedWithTheKeyNamed) {
  FakeGroupWorld w(2);
  w.Start(0);
  w.RunUntil([&] { return w.Coordinator().has_value(); }, 30s);
  w.Start(1, {{"command_arg", "--save-every=7"}});
  ASSERT_TRUE(w.RunUntilExited(60s, {1}));
  EXPECT_EQ(w.node(1).result.exit_code, kExitUsage);
  EXPECT_TRUE(w.node(1).launches.empty());
  auto listed = ListAll(w.store, "job/group/refused/");
  ASSERT_TRUE(listed.ok() && listed->size() == 1u);
  auto body = w.store.Get(listed->front().key);
  ASSERT_TRUE(body.ok());
  EXPECT_NE(body->find("command: ["), std::string::npos) << *body;
  EXPECT_NE(body->find("--save-every=7"), std::string::npos) << *body;
  EXPECT_FALSE(w.node(0).done) << "the coordinator waits for a member with its settings";
}

TEST(GroupWorld, AMemberLostWithoutANoticeEndsTheRoundStaleAndItsReplacementResumes) {
  FakeGroupWorld w(2);
  w.trainer.steps = 50;
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return w.NewestGroupStep() >= 10; }, 60s));
  const int coordinator = *w.Coordinator();
  const int lost = 1 - coordinator;
  w.Kill(lost);
  ASSERT_TRUE(w.RunUntil([&] { return !FirstEnd(w, 1).empty(); }, 30s));
  EXPECT_EQ(FirstEnd(w, 1), "stale");
  EXPECT_FALSE(w.node(coordinator).done) << "the survivor waits for a replacement";
  w.Start(lost);
  ASSERT_TRUE(w.RunUntilExited(300s, {0, 1}));
  EXPECT_EQ(w.node(0).result.exit_code, kExitOk);
  EXPECT_EQ(w.node(1).result.exit_code, kExitOk);
  EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 50));
  ExpectWholeGroupSnapshots(w, 2);
}

TEST(GroupWorld, TheCoordinatorLostAtAnyStepOfAGroupCommitLeavesOnlyWholeSnapshots) {
  // Each write a coordinator makes around a group snapshot, lost just before it lands.
  for (const std::string step : {"lease", "groups/", "-snapshot.json", "final.json", "complete"}) {
    SCOPED_TRACE("the coordinator dies at its write of " + step);
    FakeGroupWorld w(2);
    w.trainer.steps = 30;
    w.StartAll();
    ASSERT_TRUE(w.RunUntil([&] { return w.NewestGroupStep() >= 5; }, 60s));
    const int coordinator = *w.Coordinator();
    w.KillAtPutOf(coordinator, step);
    if (step == "final.json") w.node(1 - coordinator).imds->PostNotice(120s);
    ASSERT_TRUE(w.RunUntil([&] { return w.node(coordinator).dead; }, 120s));
    w.Start(coordinator);
    if (step == "final.json") w.Start(1 - coordinator);  // the noticed node left
    ASSERT_TRUE(w.RunUntilExited(600s, {0, 1}));
    EXPECT_EQ(w.node(0).result.exit_code, kExitOk);
    EXPECT_EQ(w.node(1).result.exit_code, kExitOk);
    EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 30));
    ExpectWholeGroupSnapshots(w, 2);
  }
}

TEST(GroupWorld, ANoticeAsksEveryTrainerAndTheAnswerIsTheGroupSnapshotThatEndsTheRound) {
  FakeGroupWorld w(2);
  w.trainer.steps = 200;
  w.trainer.save_every = 0;  // saves only when asked
  w.StartAll();
  w.At(5s, [&] { w.node(1).imds->PostNotice(120s); });
  ASSERT_TRUE(w.RunUntilExited(120s, {1}));
  EXPECT_EQ(w.node(1).result.exit_code, kExitInterrupted);
  // Both trainers were asked, each saved once, and the group snapshot of that step answers.
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).signals.front(), SIGUSR1) << s;
  ASSERT_EQ(w.GroupSeqs().size(), 1u);
  const int64_t answer = *w.NewestGroupStep();
  EXPECT_GE(answer, 15);  // about 5 s of 200 ms steps before the notice
  auto final_record = w.store.Get("job/group/rounds/" + SeqName(1) + "/final.json");
  ASSERT_TRUE(final_record.ok());
  EXPECT_NE(final_record->find("\"step\":" + std::to_string(answer)), std::string::npos)
      << *final_record;
  EXPECT_FALSE(w.node(0).done) << "the other node waits for the next round";
}

TEST(GroupWorld, ANoticeTooLateForAnAnswerEndsTheNodeWithExit74) {
  FakeGroupWorld w(2);
  w.trainer.steps = 200;
  w.trainer.save_every = 0;
  w.StartAll();
  // 8 s left: the round is given up on 10 s before the deadline, at once.
  w.At(5s, [&] { w.node(1).imds->PostNotice(8s); });
  ASSERT_TRUE(w.RunUntilExited(60s, {1}));
  EXPECT_EQ(w.node(1).result.exit_code, kExitNotCommitted);
  EXPECT_TRUE(w.GroupSeqs().empty());
  EXPECT_FALSE(w.node(1).trainer) << "its trainer was stopped";
}

TEST(GroupWorld, AStopSignalOnOneNodeCommitsTheGroupAndExits75) {
  FakeGroupWorld w(2);
  w.trainer.steps = 200;
  w.StartAll();
  w.At(4s, [&] { w.node(0).stop_requested = true; });
  ASSERT_TRUE(w.RunUntilExited(120s, {0}));
  EXPECT_EQ(w.node(0).result.exit_code, kExitInterrupted);
  EXPECT_EQ(FirstEnd(w, 1), "stop");
  EXPECT_FALSE(w.GroupSeqs().empty());
}

TEST(GroupWorld, AFrozenStoreOnAMemberEndsTheRoundAndTheMemberRejoinsOnceItAnswers) {
  FakeGroupWorld w(2);
  w.trainer.steps = 60;
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return w.NewestGroupStep() >= 5; }, 60s));
  const int member = 1 - *w.Coordinator();
  w.node(member).store->Freeze();
  w.At(w.Elapsed() + 20s, [&] { w.node(member).store->Thaw(); });
  ASSERT_TRUE(w.RunUntil([&] { return !FirstEnd(w, 1).empty(); }, 60s));
  EXPECT_EQ(FirstEnd(w, 1), "stale");
  ASSERT_TRUE(w.RunUntilExited(300s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).result.exit_code, kExitOk) << s;
  EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 60));
  ExpectWholeGroupSnapshots(w, 2);
}

TEST(GroupWorld, AFrozenStoreOnTheCoordinatorHandsTheLeaseToTheOtherNode) {
  FakeGroupWorld w(2);
  w.trainer.steps = 60;
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return w.NewestGroupStep() >= 5; }, 60s));
  const int first = *w.Coordinator();
  w.node(first).store->Freeze();
  ASSERT_TRUE(w.RunUntil([&] { return w.Coordinator() == 1 - first; }, 60s));
  w.node(first).store->Thaw();
  ASSERT_TRUE(w.RunUntilExited(300s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).result.exit_code, kExitOk) << s;
  EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 60));
  ExpectWholeGroupSnapshots(w, 2);
}

TEST(GroupWorld, ANodeThatBootsIntoACompleteJobRunsOnCompleteAndExitsZero) {
  FakeGroupWorld w(2, {{"on_complete", "scale-to-zero"}});
  w.trainer.steps = 10;
  w.StartAll();
  ASSERT_TRUE(w.RunUntilExited(120s));
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(w.node(s).result.exit_code, kExitOk);
    // Every node releases the group, not only the coordinator.
    ASSERT_FALSE(w.node(s).autoscaling.calls.empty()) << s;
    EXPECT_NE(w.node(s).autoscaling.calls.back().find("Update asg-1 min=0 desired=0"),
              std::string::npos);
  }
  w.Start(1);
  ASSERT_TRUE(w.RunUntilExited(30s, {1}));
  EXPECT_EQ(w.node(1).result.exit_code, kExitOk);
  EXPECT_TRUE(w.node(1).launches.empty());
  ASSERT_FALSE(w.node(1).autoscaling.calls.empty());
}

TEST(GroupWorld, ANoticedNodeCompletesTheLifecycleActionAfterItsTrainerStopped) {
  FakeGroupWorld w(2, {{"lifecycle_hook", "spot-drain"}});
  w.trainer.steps = 200;
  w.StartAll();
  w.At(4s, [&] { w.node(1).imds->PostNotice(120s); });
  ASSERT_TRUE(w.RunUntilExited(120s, {1}));
  EXPECT_EQ(w.node(1).result.exit_code, kExitInterrupted);
  ASSERT_FALSE(w.node(1).autoscaling.calls.empty());
  EXPECT_EQ(w.node(1).autoscaling.calls.back(),
            "Complete asg-1 spot-drain " + w.node(1).instance);
  EXPECT_TRUE(w.node(0).autoscaling.calls.empty()) << "the other node was not noticed";
}

TEST(GroupWorld, TheCheckpointIntervalAsksEveryNodesTrainer) {
  FakeGroupWorld w(2, {{"checkpoint_interval", "3s"}});
  w.trainer.steps = 100;  // 20 s
  w.trainer.save_every = 0;
  w.StartAll();
  ASSERT_TRUE(w.RunUntilExited(120s));
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(w.node(s).result.exit_code, kExitOk);
    EXPECT_GE(std::count(w.node(s).signals.begin(), w.node(s).signals.end(), SIGUSR1), 5) << s;
  }
  // The answers became group snapshots: 20 s at one every 3 s, and the last
  // (retention keeps the newest few).
  ASSERT_FALSE(w.GroupSeqs().empty());
  EXPECT_GE(w.GroupSeqs().back(), 5u);
  EXPECT_EQ(w.NewestGroupStep(), 100);
}

TEST(GroupWorld, ARebalanceOnOneNodeFlushesEveryNodeWithoutEndingTheRound) {
  FakeGroupWorld w(2, {{"on_rebalance", "snapshot"}, {"upload_interval", "1h"}});
  w.trainer.steps = 100;
  w.trainer.save_every = 0;
  w.StartAll();
  w.At(5s, [&] { w.node(1).imds->PostRebalance(); });
  ASSERT_TRUE(w.RunUntil([&] { return !w.GroupSeqs().empty(); }, 30s));
  EXPECT_EQ(FirstEnd(w, 1), "") << "the round goes on";
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).signals.front(), SIGUSR1) << s;
  ASSERT_TRUE(w.RunUntilExited(120s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).result.exit_code, kExitOk);
  EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 100));
}

TEST(GroupWorld, ACheckpointLeftFromBeforeTheRoundIsNotUploadedAsItsPart) {
  FakeGroupWorld w(2);
  w.trainer.steps = 20;
  WorldNode& n = w.Start(0);
  ASSERT_TRUE(WriteFileAtomic(n.ckpt + "/step_75.pt", "0 75 12345\n").ok());
  w.Start(1);
  ASSERT_TRUE(w.RunUntilExited(120s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).result.exit_code, kExitOk);
  for (uint64_t round = 1; round <= w.NewestRound(); ++round) {
    auto parts = GroupStore(w.store, "job").Parts(round);
    ASSERT_TRUE(parts.ok());
    for (const PartRecord& p : *parts) EXPECT_NE(p.step, 75) << "round " << round;
  }
  EXPECT_EQ(*ReadFileToString(n.ckpt + "/step_75.pt"), "0 75 12345\n");
}

}  // namespace
}  // namespace sg::testing
