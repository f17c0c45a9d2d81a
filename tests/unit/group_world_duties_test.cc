// What a group node owes as one node does, on the fake multi-node world
// (tests/support/fake_group_world.h):
// real group agents, one in-memory store, one fake clock, fake trainers that
// step together. No process, socket or sleep: each test runs minutes of the
// group's time in milliseconds, and the same way on every run.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>

#include "agent/config/exit_codes.h"
#include "agent/ledger/ledger.h"
#include "agent/repo/group_store.h"
#include "agent/repo/group_suspect.h"
#include "agent/repo/snapshot_writer.h"
#include "agent/repo/store_layout.h"
#include "common/files.h"
#include "tests/support/capture_in_place.h"
#include "tests/support/group_world_checks.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

using namespace std::chrono_literals;

// A job that ran on one node (a single-node snapshot and no group one) is
// not silently started over by a group: refused (exit 2) until
// group.from_single says `fresh`.
TEST(GroupWorld, AJobThatRanOnOneNodeIsNotStartedOverByAGroupUnlessToldTo) {
  FakeGroupWorld w(2);
  w.trainer.steps = 20;
  TempDir single;
  WriteTree(single.Join("ckpt"), {{"step_10.pt", {"0 10 12345\n", 0644}}});
  auto capture = CaptureTree(single.Join("ckpt"), 10);
  ASSERT_TRUE(capture.ok()) << capture.status().ToString();
  SnapshotRequest request;
  request.job = "job";
  request.instance = "i-single";
  ASSERT_TRUE(SnapshotWriter(w.store, w.clock, SnapshotOptions{}).Write(*capture, request).ok());

  w.Start(0);
  ASSERT_TRUE(w.RunUntilExited(30s, {0}));
  EXPECT_EQ(w.node(0).result.exit_code, kExitUsage);
  EXPECT_TRUE(w.node(0).launches.empty()) << "nothing was started fresh";
  EXPECT_TRUE(w.GroupSeqs().empty());

  for (int s = 0; s < 2; ++s) w.Start(s, {{"group.from_single", "fresh"}});
  ASSERT_TRUE(w.RunUntilExited(120s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).result.exit_code, kExitOk) << s;
  EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 20));
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

TEST(GroupWorld, AStopSignalOnOneNodeCommitsTheGroupAndExits75) {
  FakeGroupWorld w(2);
  w.trainer.steps = 200;
  w.StartAll();
  w.At(4s, [&] { w.node(0).stop_requested = true; });
  ASSERT_TRUE(w.RunUntilExited(120s, {0}));
  EXPECT_EQ(w.node(0).result.exit_code, kExitInterrupted);
  EXPECT_EQ(FirstEnd(w, 1), "stop");
  EXPECT_FALSE(w.GroupSeqs().empty());
  // Its exit event says why: a stop signal, not a notice.
  auto events = ReadJobEvents(w.store, "job");
  ASSERT_TRUE(events.ok());
  const Ledger ledger = BuildLedger(*events);
  const auto stopped = std::find_if(ledger.attempts.begin(), ledger.attempts.end(),
                                    [&](const LedgerAttempt& a) {
                                      return a.instance == w.node(0).instance;
                                    });
  ASSERT_NE(stopped, ledger.attempts.end());
  EXPECT_EQ(stopped->exit_reason, "signal");
  EXPECT_EQ(stopped->exit_code, kExitInterrupted);
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

// complete_when holds for a group as for one node: an exit 0 below it is a
// crash of the round, restarted from the newest group snapshot and counted
// against restart.max; the job is never marked complete.
TEST(GroupWorld, AnExitZeroBelowCompleteWhenIsACrashAndNeverCompletesTheJob) {
  FakeGroupWorld w(2, {{"complete_when", R"({"step_at_least": 100})"}, {"restart.max", "2"}});
  w.trainer.steps = 40;
  w.StartAll();
  ASSERT_TRUE(w.RunUntilExited(600s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).result.exit_code, kExitFailure) << s;
  EXPECT_FALSE(w.store.Head(CompleteKey("job")).ok()) << "never complete";
  auto events = ReadJobEvents(w.store, "job");
  ASSERT_TRUE(events.ok());
  const auto unearned = std::count_if(events->begin(), events->end(), [](const nlohmann::json& e) {
    return e.value("kind", "") == "unearned" &&
           e.value("why", "").find("below step_at_least 100") != std::string::npos;
  });
  EXPECT_GE(unearned, 2) << "every rank's exit 0 of the first round";
  auto suspects = GroupSuspects(w.store, "job");
  ASSERT_TRUE(suspects.ok());
  EXPECT_TRUE(suspects->empty()) << "an exit 0 is no failure to resume: no snapshot is suspect";

  FakeGroupWorld met(2, {{"complete_when", R"({"step_at_least": 40})"}});
  met.trainer.steps = 40;
  met.StartAll();
  ASSERT_TRUE(met.RunUntilExited(120s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(met.node(s).result.exit_code, kExitOk) << s;
  EXPECT_TRUE(met.store.Head(CompleteKey("job")).ok());
}

// A group node reads its instance's prices once, as one node's agent does,
// and the ledger prices its attempt with them (docs/operations.md, "Cost").
TEST(GroupWorld, EveryNodeRecordsItsInstancesPricesForTheReport) {
  FakeGroupWorld w(2);
  int spot_reads = 0;
  w.prices = PriceReaders{
      [&](const std::string& type, const std::string& zone) -> StatusOr<SpotPrice> {
        ++spot_reads;
        SpotPrice p;
        p.instance_type = type;
        p.availability_zone = zone;
        p.usd_per_hour = 0.4;
        return p;
      },
      [](const std::string& type, const std::string& region) -> StatusOr<OnDemandPrice> {
        OnDemandPrice p;
        p.instance_type = type;
        p.region = region;
        p.usd_per_hour = 1.2;
        return p;
      }};
  w.trainer.steps = 20;
  w.StartAll();
  ASSERT_TRUE(w.RunUntilExited(120s));
  EXPECT_EQ(spot_reads, 2) << "once per node's attempt";
  auto events = ReadJobEvents(w.store, "job");
  ASSERT_TRUE(events.ok());
  const Ledger ledger = BuildLedger(*events);
  ASSERT_EQ(ledger.attempts.size(), 2u);
  for (const LedgerAttempt& a : ledger.attempts) {
    EXPECT_EQ(a.spot_price, 0.4) << a.id;
    EXPECT_EQ(a.on_demand_price, 1.2) << a.id;
    EXPECT_EQ(a.instance_type, "g5.xlarge") << a.id;
  }
}

// A group node writes the metrics file as one node's agent does: its phase,
// the newest group snapshot's step it read, its own part's bytes.
TEST(GroupWorld, EveryNodeWritesTheMetricsFile) {
  FakeGroupWorld w(2);
  w.trainer.steps = 20;
  TempDir dir;
  for (int s = 0; s < 2; ++s) {
    w.Start(s, {{"metrics_file", dir.Join("node" + std::to_string(s) + ".prom")}});
  }
  ASSERT_TRUE(w.RunUntilExited(120s));
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(w.node(s).result.exit_code, kExitOk) << s;
    auto prom = ReadFileToString(dir.Join("node" + std::to_string(s) + ".prom"));
    ASSERT_TRUE(prom.ok()) << s;
    EXPECT_NE(prom->find("spotguard_phase{job=\"job\",phase=\"done\"} 1"), std::string::npos)
        << *prom;
    EXPECT_NE(prom->find("spotguard_committed_step{job=\"job\"} 20"), std::string::npos)
        << *prom;
    EXPECT_EQ(prom->find("spotguard_uploaded_bytes_total{job=\"job\"} 0\n"), std::string::npos)
        << "its parts' bytes: " << *prom;
  }
}

}  // namespace
}  // namespace sg::testing
