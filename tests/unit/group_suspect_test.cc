// The count that makes a group snapshot suspect (agent/repo/group_suspect.h).
#include "agent/repo/group_suspect.h"

#include <gtest/gtest.h>

#include "agent/cli/group_commands.h"
#include "agent/cli/group_status.h"
#include "agent/repo/group_retention.h"
#include "agent/repo/group_store.h"
#include "tests/support/fake_clock.h"
#include "tests/support/group_records.h"
#include "tests/support/memory_store.h"

namespace sg::testing {
namespace {

TEST(GroupResumeGuard, CrashedRoundsFromOneSnapshotThatCommitNothingMakeItSuspect) {
  GroupResumeGuard guard(2);
  EXPECT_EQ(guard.RoundEnded(7, true, false, "round 2: crash"), std::nullopt);
  EXPECT_EQ(guard.RoundEnded(7, true, false, "round 3: crash"), 7u);
  EXPECT_EQ(guard.ends(), (std::vector<std::string>{"round 2: crash", "round 3: crash"}));
}

TEST(GroupResumeGuard, ProgressAnotherEndOrAnotherSnapshotStartsTheCountAgain) {
  GroupResumeGuard guard(2);
  EXPECT_EQ(guard.RoundEnded(7, true, false, "a"), std::nullopt);
  // A group snapshot was committed in the round: the trainers got past it.
  EXPECT_EQ(guard.RoundEnded(7, true, true, "b"), std::nullopt);
  EXPECT_EQ(guard.RoundEnded(7, true, false, "c"), std::nullopt);
  // A round ended otherwise (a notice, a stale member).
  EXPECT_EQ(guard.RoundEnded(7, false, false, "d"), std::nullopt);
  EXPECT_EQ(guard.RoundEnded(7, true, false, "e"), std::nullopt);
  // Another snapshot's crashes count on their own, also when a newer
  // (suspect) one exists.
  EXPECT_EQ(guard.RoundEnded(6, true, false, "f"), std::nullopt);
  EXPECT_EQ(guard.RoundEnded(6, true, false, "g"), 6u);
  // A fresh round never counts.
  EXPECT_EQ(guard.RoundEnded(std::nullopt, true, false, "h"), std::nullopt);
  EXPECT_EQ(guard.RoundEnded(std::nullopt, true, false, "i"), std::nullopt);
}

TEST(GroupResumeGuard, OneFailureIsEnoughWhenMaxFailuresIsOne) {
  GroupResumeGuard guard(1);
  EXPECT_EQ(guard.RoundEnded(3, true, false, "a"), 3u);
  EXPECT_EQ(guard.RoundEnded(3, true, false, "b"), 3u) << "marked again if it is planned again";
}

// Retention keeps `keep` group snapshots the trainers can resume from: a
// suspect one newer than those is kept and not counted; an older one goes,
// and its mark with it.
TEST(GroupSuspects, RetentionNeverCountsASuspectGroupSnapshotAmongTheKeptOnes) {
  FakeClock clock;
  MemoryStore store(&clock);
  GroupStore group(store, "job");
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    GroupCommit g = RecordOnlyGroupCommit(2, static_cast<int64_t>(seq) * 10);
    g.seq = seq;
    g.round = seq;
    ASSERT_TRUE(group.CommitGroup(g).ok());
  }
  for (uint64_t seq : {1u, 4u, 5u}) {
    ASSERT_TRUE(MarkGroupSuspect(store, "job", seq, {{"seq", seq}}).ok());
  }
  auto gc = CollectGroupGarbage(store, clock, "job", GcOptions{2, std::chrono::hours(1)});
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->deleted, std::vector<uint64_t>{1});
  auto left = group.Groups();
  ASSERT_TRUE(left.ok());
  std::vector<uint64_t> seqs;
  for (const GroupCommit& g : *left) seqs.push_back(g.seq);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{2, 3, 4, 5}));
  auto suspects = GroupSuspects(store, "job");
  ASSERT_TRUE(suspects.ok());
  EXPECT_EQ(*suspects, (std::set<uint64_t>{4, 5}));
  // `ls` shows the marks, newest first.
  Config config;
  config.job = "job";
  config.nodes = 2;
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunGroupLs(config, store, /*json=*/true), 0);
  const auto rows = nlohmann::json::parse(::testing::internal::GetCapturedStdout());
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0]["seq"], 5);
  EXPECT_EQ(rows[0]["suspect"], true);
  EXPECT_EQ(rows[1]["suspect"], true);
  EXPECT_EQ(rows[2]["suspect"], false);
  // So does `status`.
  auto status = GroupStatusJson(config, store);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ((*status)["suspect"], nlohmann::json::array({4, 5}));
  EXPECT_NE(GroupStatusText(*status).find("suspect: group snapshot 0000000004, which the trainers "
                                          "could not resume from (spotguard unsuspect 4"),
            std::string::npos)
      << GroupStatusText(*status);
  EXPECT_TRUE(ClearGroupSuspect(store, "job", 4).ok());
  EXPECT_TRUE(ClearGroupSuspect(store, "job", 4).Is(StatusCode::kNotFound));
}

}  // namespace
}  // namespace sg::testing
