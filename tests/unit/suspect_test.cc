// Snapshots the trainer cannot resume from (agent/run/suspect.h) in a file://
// store: the mark as the history and retention see it, `unsuspect`, and the
// local copy set aside beside the checkpoint dir.
#include "agent/run/suspect.h"

#include <gtest/gtest.h>

#include "agent/repo/retention.h"
#include "agent/repo/store_layout.h"
#include "tests/support/file_store_fixture.h"
#include "tests/support/generic_config.h"

namespace sg::testing {
namespace {

class SuspectTest : public FileStoreTest {
 protected:
  uint64_t Commit(int64_t step, const std::string& content) {
    const std::string name = "step-" + std::to_string(step) + ".bin";
    auto r = CommitTree({{name, {content}}}, {}, step);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->seq : 0;
  }
  void Mark(uint64_t seq) {
    SuspectRecord r{seq, "2026-11-28T18:00:00.000Z", "i-test", "/ckpt/x", {"exit code 3"}, {}};
    ASSERT_TRUE(MarkSuspect(*store_, "job", r).ok());
  }
  SnapshotHistory History() {
    SnapshotCatalog catalog(*store_, "job");
    auto h = catalog.History();
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return h.ok() ? *h : SnapshotHistory{};
  }
};

TEST_F(SuspectTest, AMarkedSnapshotIsSuspectInTheHistoryUntilUnsuspected) {
  const uint64_t good = Commit(1, "good");
  const uint64_t bad = Commit(2, "poison");
  SuspectRecord r{bad, "2026-11-28T18:00:00.000Z", "i-test", "/ckpt/step-2.bin",
                  {"exit code 3", "exit code 3"}, {"loading step-2.bin", "poisoned"}};
  ASSERT_TRUE(MarkSuspect(*store_, "job", r).ok());
  SnapshotHistory h = History();
  EXPECT_EQ(h.suspect, std::vector<uint64_t>{bad});
  EXPECT_TRUE(h.IsSuspect(bad));
  EXPECT_FALSE(h.IsSuspect(good));
  EXPECT_EQ(h.entries.size(), 2u);  // still part of the history; restore leaves it out
  // The record holds the exits and the trainer's last lines.
  auto body = static_cast<ObjectStore&>(*store_).Get(SuspectKey("job", bad));
  ASSERT_TRUE(body.ok());
  auto j = nlohmann::json::parse(*body);
  EXPECT_EQ(j["exits"], (std::vector<std::string>{"exit code 3", "exit code 3"}));
  EXPECT_EQ(j["last_lines"][1], "poisoned");

  ASSERT_TRUE(ClearSuspect(*store_, "job", bad).ok());
  EXPECT_TRUE(History().suspect.empty());
  EXPECT_TRUE(ClearSuspect(*store_, "job", bad).Is(StatusCode::kNotFound));
}

TEST_F(SuspectTest, RetentionNeverCountsASuspectSnapshotAsAKeptGoodOne) {
  std::vector<uint64_t> seqs;
  for (int step = 1; step <= 5; ++step) seqs.push_back(Commit(step, "s" + std::to_string(step)));
  Mark(seqs[4]);  // the newest
  auto gc = CollectGarbage(*store_, clock_, "job", GcOptions{.keep = 2});
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  // Two good ones kept (4 and 3) and the suspect 5 beside them; 1 and 2 go.
  EXPECT_EQ(gc->deleted, (std::vector<uint64_t>{seqs[1], seqs[0]}));
  SnapshotHistory h = History();
  ASSERT_EQ(h.entries.size(), 3u);
  EXPECT_EQ(h.suspect, std::vector<uint64_t>{seqs[4]});
}

TEST_F(SuspectTest, ASuspectSnapshotOlderThanTheKeptGoodOnesGoesWithItsMark) {
  std::vector<uint64_t> seqs;
  for (int step = 1; step <= 3; ++step) seqs.push_back(Commit(step, "s" + std::to_string(step)));
  Mark(seqs[0]);
  auto gc = CollectGarbage(*store_, clock_, "job", GcOptions{.keep = 2});
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->deleted, std::vector<uint64_t>{seqs[0]});
  EXPECT_TRUE(static_cast<ObjectStore&>(*store_).Head(SuspectKey("job", seqs[0])).status().Is(
      StatusCode::kNotFound));
}

TEST_F(SuspectTest, RestoreLeavesSuspectSnapshotsOutAndSetsTheirLocalCopyAside) {
  const uint64_t good = Commit(1, "good");
  const uint64_t bad = Commit(2, "poison");
  Mark(bad);
  const Config config = GenericCheckpointConfig(dir_.Join("ckpt"), "*.bin");
  WriteTree(config.checkpoint_dir, {{"step-1.bin", {"good"}}, {"step-2.bin", {"poison"}}});
  clock_.Advance(std::chrono::seconds(5));  // both settled

  SnapshotHistory h = History();
  ASSERT_TRUE(SetAsideSuspect(config, clock_, h).ok());
  ASSERT_EQ(h.entries.size(), 1u);
  EXPECT_EQ(h.entries[0].seq, good);
  EXPECT_EQ(ReadTree(config.checkpoint_dir), (Tree{{"step-1.bin", {"good"}}}));
  EXPECT_EQ(ReadTree(config.checkpoint_dir + ".spotguard-suspect-" + SeqName(bad)),
            (Tree{{"step-2.bin", {"poison"}}}));
  // Again (a later start): nothing local is suspect now; the first copy stays.
  SnapshotHistory again = History();
  ASSERT_TRUE(SetAsideSuspect(config, clock_, again).ok());
  EXPECT_EQ(ReadTree(config.checkpoint_dir), (Tree{{"step-1.bin", {"good"}}}));
}

}  // namespace
}  // namespace sg::testing
