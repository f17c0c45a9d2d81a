// Fencing tokens that readers enforce (agent/repo/fencing.h): a writer that lost
// the lease never adds to the job's history, however late its manifest lands.
// The interleaving is driven step by step: the fenced writer's manifest PUT
// is held at the moment right after its last successful renewal (inside its
// verify_before_commit hook) while the successor takes over and commits.
#include "agent/repo/fencing.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "agent/repo/lease.h"
#include "agent/repo/manifest.h"
#include "agent/repo/restorer.h"
#include "agent/repo/retention.h"
#include "agent/repo/snapshot_writer.h"
#include "common/file_store.h"
#include "common/files.h"
#include "tests/support/file_store_fixture.h"

namespace sg::testing {
namespace {

using std::chrono::milliseconds;

TEST(FenceTable, AdmitsWhatNoLaterGenerationFencedOff) {
  const FenceTable table({{1, 0}, {2, 5}, {4, 9}});
  EXPECT_TRUE(table.Admits(5, 1));   // at the line of generation 2
  EXPECT_FALSE(table.Admits(6, 1));  // above it, from an older generation
  EXPECT_TRUE(table.Admits(6, 2));   // generation 2's own commits
  EXPECT_TRUE(table.Admits(9, 3));
  EXPECT_FALSE(table.Admits(10, 3));  // generation 4 drew its line at 9
  EXPECT_TRUE(table.Admits(10, 4));
  EXPECT_EQ(table.Excluding(6, 1)->generation, 2u);
  EXPECT_EQ(table.AdmitsAnyUpTo(), 0u);
  EXPECT_TRUE(FenceTable().Admits(123, 0));
}

TEST(FenceTable, KeysCarryTheLineAndRejectStrangers) {
  const std::string key = FenceKey("j", {7, 42});
  EXPECT_EQ(key, "j/fences/0000000007-0000000042");
  auto parsed = ParseFenceKey("j", key);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->generation, 7u);
  EXPECT_EQ(parsed->after_seq, 42u);
  EXPECT_FALSE(ParseFenceKey("j", "j/fences/7-42"));
  EXPECT_FALSE(ParseFenceKey("j", "j/fences/0000000007_0000000042"));
  EXPECT_FALSE(ParseFenceKey("j", "other/fences/0000000007-0000000042"));
}

class FencingTest : public FileStoreTest {
 protected:
  // A holder: takes the lease and draws its fence, as the agent does.
  std::unique_ptr<LeaseKeeper> TakeOver(const std::string& instance) {
    auto keeper = std::make_unique<LeaseKeeper>(*store_, clock_, "job", instance,
                                                LeaseOptions{milliseconds(100), milliseconds(300)});
    for (int i = 0; i < 10; ++i) {
      auto a = keeper->TryAcquire();
      EXPECT_TRUE(a.ok()) << a.status().ToString();
      if (a.ok() && a->outcome == LeaseKeeper::Outcome::kAcquired) break;
      clock_.Advance(milliseconds(100));
    }
    EXPECT_TRUE(keeper->held());
    EXPECT_TRUE(DrawFence(*store_, "job", keeper->generation(), instance, "t").ok());
    return keeper;
  }

  // Commits `content` as the holder's checkpoint; `before_manifest` runs
  // after the renewal that precedes the commit, before the manifest PUT.
  StatusOr<SnapshotResult> Commit(LeaseKeeper& holder, const std::string& content, int64_t step,
                                  const std::function<void()>& before_manifest = {}) {
    SnapshotRequest req;
    req.preset = "pytorch";
    req.generation = holder.generation();
    req.verify_before_commit = [&]() -> Status {
      SG_RETURN_IF_ERROR(holder.Renew());
      if (before_manifest) before_manifest();
      return Status::Ok();
    };
    return CommitTree({{"model.pt", {content, 0644}}}, req, step);
  }

  std::vector<uint64_t> History() {
    SnapshotCatalog catalog(*store_, "job");
    auto seqs = catalog.Committed();
    EXPECT_TRUE(seqs.ok()) << seqs.status().ToString();
    return seqs.ok() ? *seqs : std::vector<uint64_t>{};
  }
};

// The reproduction: a partition right after the holder's pre-commit renewal.
TEST_F(FencingTest, AFencedWritersLateManifestNeverJoinsTheHistory) {
  auto a = TakeOver("a");
  ASSERT_TRUE(Commit(*a, "a-100", 100).ok());  // seq 1
  std::unique_ptr<LeaseKeeper> b;
  // A's next commit: renewed, then frozen until B has taken over and committed.
  auto late = Commit(*a, "a-300", 300, [&] {
    clock_.Advance(milliseconds(400));  // A's lease goes stale in B's eyes
    b = TakeOver("b");
    ASSERT_EQ(b->generation(), 2u);
    ASSERT_TRUE(Commit(*b, "b-200", 200).ok());  // resumed from step 100
  });
  ASSERT_TRUE(late.ok()) << late.status().ToString();  // the manifest did land, late
  ASSERT_TRUE(store_->Head(ManifestKey("job", late->seq)).ok());

  EXPECT_EQ(History(), (std::vector<uint64_t>{3, 1}));
  // Nothing A does from now on is accepted either.
  EXPECT_EQ(a->Renew().reason(), "Fenced");

  // B's newest is damaged: the fallback is B's base, never A's late state.
  SnapshotCatalog catalog(*store_, "job");
  auto b_manifest = catalog.ReadManifest(3);
  ASSERT_TRUE(b_manifest.ok());
  const std::string b_object = dir_.Join("store/job/" + b_manifest->files.at(0).key);
  ASSERT_TRUE(std::filesystem::exists(b_object)) << b_object;
  ASSERT_TRUE(WriteFileAtomic(b_object, "garbage").ok());
  Restorer restorer(*store_, RestoreOptions{});
  auto restored = restorer.Restore("job", dir_.Join("out"), std::nullopt);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->seq, 1u);
  EXPECT_EQ(ReadTree(dir_.Join("out")), (Tree{{"model.pt", {"a-100", 0644}}}));
}

TEST_F(FencingTest, RetentionRemovesFencedSnapshotsAndNeverCountsThemAsKept) {
  auto a = TakeOver("a");
  ASSERT_TRUE(Commit(*a, "a-1", 1).ok());
  std::unique_ptr<LeaseKeeper> b;
  ASSERT_TRUE(Commit(*a, "a-2", 2, [&] {
                clock_.Advance(milliseconds(400));
                b = TakeOver("b");
                ASSERT_TRUE(Commit(*b, "b-2", 2).ok());
              }).ok());
  auto gc = CollectGarbage(*store_, clock_, "job", GcOptions{.keep = 2});
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->abandoned, (std::vector<uint64_t>{2}));
  EXPECT_TRUE(gc->deleted.empty());  // 3 and 1 are the two kept
  EXPECT_EQ(History(), (std::vector<uint64_t>{3, 1}));
  EXPECT_FALSE(store_->Head(ManifestKey("job", 2)).ok());
}

TEST_F(FencingTest, AHandOverAfterAReleaseKeepsTheWholeHistory) {
  auto a = TakeOver("a");
  ASSERT_TRUE(Commit(*a, "a-1", 1).ok());
  ASSERT_TRUE(a->Release().ok());
  auto b = TakeOver("b");
  ASSERT_TRUE(Commit(*b, "b-2", 2).ok());
  auto c = TakeOver("c");  // b crashed: c waits out the timeout
  ASSERT_TRUE(Commit(*c, "c-3", 3).ok());
  EXPECT_EQ(History(), (std::vector<uint64_t>{3, 2, 1}));
}

TEST_F(FencingTest, ASnapshotTakenByHandCarriesTheCurrentGeneration) {
  auto a = TakeOver("a");
  ASSERT_TRUE(a->Release().ok());
  auto b = TakeOver("b");
  auto generation = LeaseGenerationNow(*store_, "job");
  ASSERT_TRUE(generation.ok());
  EXPECT_EQ(*generation, 2u);
  auto none = LeaseGenerationNow(*store_, "other-job");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0u);
}

}  // namespace
}  // namespace sg::testing
