// The group loop keeps no store call on it (docs/design.md §14): a store
// that does not answer holds the calls queued behind it, never the notice,
// the stop signal or the exit. On the fake multi-node world
// (tests/support/fake_group_world.h), with no process, socket or sleep.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>

#include "agent/config/exit_codes.h"
#include "agent/run/daemon.h"
#include "tests/support/group_world_checks.h"

namespace sg::testing {
namespace {

using namespace std::chrono_literals;

TEST(GroupWorldLoop, ANoticeOnANodeWhoseStoreHangsIsActedOnAtOnceAndItExitsBeforeTheDeadline) {
  FakeGroupWorld w(2);
  w.trainer.steps = 400;
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return w.NewestGroupStep() >= 5; }, 60s));
  WorldNode& n = w.node(1);
  n.store->Freeze();  // and it never answers again
  w.RunUntil([] { return false; }, 2s);
  const auto noticed = w.Elapsed();
  n.imds->PostNotice(30s);
  // The turn that reads the notice (every 200 ms) asks the trainer and
  // writes the notice file: no store call stands before either.
  ASSERT_TRUE(w.RunUntil([&] { return GotSignal(n, SIGUSR1); }, 500ms));
  EXPECT_TRUE(std::filesystem::exists(NoticeFilePath(n.config)));
  // Nothing can be committed: the round is given up on 10 s before the
  // deadline, and the exit's bound ends at a second before it.
  ASSERT_TRUE(w.RunUntilExited(30s, {1}));
  EXPECT_EQ(n.result.exit_code, kExitNotCommitted);
  EXPECT_LE(w.Elapsed() - noticed, 29s) << "a second before the deadline at the latest";
  EXPECT_GE(w.Elapsed() - noticed, 20s) << "it waited for an answer until 10 s before";
  EXPECT_TRUE(GotSignal(n, SIGTERM)) << "its trainer was stopped";
  EXPECT_TRUE(n.store->frozen());
  EXPECT_FALSE(n.calls.empty()) << "the calls it posted are still held by the store";
}

TEST(GroupWorldLoop, AStopSignalOnANodeWhoseStoreHangsStillStopsItsTrainer) {
  FakeGroupWorld w(2, {{"stop_timeout", "20s"}});
  w.trainer.steps = 400;
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return w.NewestGroupStep() >= 5; }, 60s));
  WorldNode& n = w.node(0);
  n.store->Freeze();
  n.stop_requested = true;
  ASSERT_TRUE(w.RunUntil([&] { return GotSignal(n, SIGUSR1); }, 200ms));
  const auto stopped = w.Elapsed();
  ASSERT_TRUE(w.RunUntilExited(30s, {0}));
  EXPECT_EQ(n.result.exit_code, kExitNotCommitted);
  // stop_timeout less the 10 s the round is given up on before it.
  EXPECT_LE(w.Elapsed() - stopped, 20s);
  EXPECT_TRUE(GotSignal(n, SIGTERM));
}

// The start's reads (is the job complete, did it run on one node) wait for
// a store that does not answer on a thread, not on the loop: a stop signal
// or a notice then ends the node with 75 and nothing changed, as it ends one
// node's start.
TEST(GroupWorldLoop, AStopSignalWhileTheStartWaitsForTheStoreEndsTheNodeWith75) {
  FakeGroupWorld w(2);
  WorldNode& n = w.Start(0);
  n.store->Freeze();
  w.RunUntil([] { return false; }, 5s);
  ASSERT_FALSE(n.done) << "the start waits for the store";
  n.stop_requested = true;
  ASSERT_TRUE(w.RunUntilExited(1s, {0}));
  EXPECT_EQ(n.result.exit_code, kExitInterrupted);
  EXPECT_TRUE(n.launches.empty()) << "no trainer was started";
  EXPECT_FALSE(n.calls.empty()) << "the start's read is still held by the store";
  EXPECT_TRUE(ListAll(w.store, "")->empty()) << "nothing was written";
}

TEST(GroupWorldLoop, ANoticeWhileTheStartWaitsForTheStoreEndsTheNodeWith75) {
  FakeGroupWorld w(2);
  WorldNode& n = w.Start(0);
  n.store->Freeze();
  w.RunUntil([] { return false; }, 5s);
  n.imds->PostNotice(100s);
  // Read by the next poll (every 200 ms).
  ASSERT_TRUE(w.RunUntilExited(1s, {0}));
  EXPECT_EQ(n.result.exit_code, kExitInterrupted);
  EXPECT_TRUE(n.launches.empty());
  EXPECT_TRUE(ListAll(w.store, "")->empty());
}

// A rebalance recommendation read while the start's reads run is not lost:
// the loop takes it with its first news, and its event is recorded.
TEST(GroupWorldLoop, ARebalanceReadDuringTheStartIsRecorded) {
  FakeGroupWorld w(2);
  w.trainer.steps = 40;
  WorldNode& n = w.Start(0);
  n.imds->PostRebalance();
  w.Start(1);
  ASSERT_TRUE(w.RunUntilExited(120s));
  auto listed = ListAll(w.store, "job/events/");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(std::count_if(listed->begin(), listed->end(),
                          [](const ObjectInfo& o) { return o.key.ends_with("-rebalance.json"); }),
            1);
}

TEST(GroupWorldLoop, ASlowStoreDelaysTheRoundNotTheTrainerAndTheJobCompletes) {
  FakeGroupWorld w(2);
  w.trainer.steps = 60;
  w.StartAll();
  // Every call of node 1 takes 300 ms: a look is then several ticks long,
  // and the loop goes on meanwhile.
  w.node(1).store->Delay(300ms);
  ASSERT_TRUE(w.RunUntilExited(400s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).result.exit_code, kExitOk) << s;
  EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 60));
  ExpectWholeGroupSnapshots(w, 2);
}

}  // namespace
}  // namespace sg::testing
