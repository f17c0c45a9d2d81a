// Group retention with parts that reuse frames (agent/repo/group_retention.h):
// a part snapshot no kept group snapshot names is uncommitted, and its
// objects go only when no remaining part references them and no writer of
// the rank is live, as one node's retention proves it (docs/design.md §4).
#include "agent/repo/group_retention.h"

#include <gtest/gtest.h>

#include "agent/repo/group_protocol.h"
#include "agent/repo/group_restore.h"
#include "agent/repo/group_store.h"
#include "agent/repo/quarantine.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/store_layout.h"
#include "tests/support/capture_in_place.h"
#include "tests/support/faulty_store.h"
#include "tests/support/file_store_fixture.h"
#include "tests/support/group_records.h"
#include "tests/support/random_bytes.h"

namespace sg::testing {
namespace {

class GroupRetentionTest : public FileStoreTest {
 protected:
  // Rank `rank`'s part of `step`: the shared weights and a small file that
  // changes every step. Frames already stored are referenced (reuse).
  PartRecord WritePart(int rank, int64_t step, SnapshotResult* result = nullptr) {
    return WriteTreePart(*store_, clock_,
                         dir_.Join("part-" + std::to_string(rank) + "-" + std::to_string(step)),
                         {{"weights.bin", {RandomBytes(3 << 20, 7 + rank)}},
                          {"state.json", {"{\"step\": " + std::to_string(step) + "}"}}},
                         rank, step, ".", result);
  }

  GroupCommit Commit(uint64_t seq, int64_t step) {
    GroupCommit g = GroupRecordOf(seq, 2, step);
    SnapshotResult zero;
    g.parts = {WritePart(0, step, &zero), WritePart(1, step)};
    reused_ = zero.reused_bytes;
    EXPECT_TRUE(GroupStore(*store_, "job").CommitGroup(g).ok());
    return g;
  }

  size_t Objects(const std::string& prefix) {
    auto listed = ListAll(*store_, prefix);
    EXPECT_TRUE(listed.ok());
    return listed.ok() ? listed->size() : 0;
  }

  // The object holding the first frame of `path` in rank `rank`'s part
  // `seq`, relative to its part job.
  std::string ObjectOf(int rank, uint64_t seq, const std::string& path) {
    auto m = SnapshotCatalog(*store_, PartJob("job", rank)).ReadManifest(seq);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) return "";
    for (const ManifestFile& f : m->files) {
      if (f.path == path) return f.frames.at(0).key;
    }
    ADD_FAILURE() << "no " << path << " in part " << seq << " of rank " << rank;
    return "";
  }

  uint64_t reused_ = 0;
};

TEST_F(GroupRetentionTest, APartDroppedByRetentionKeepsTheFramesALaterPartReferences) {
  const GroupCommit first = Commit(1, 10);
  const GroupCommit second = Commit(2, 20);
  ASSERT_GE(reused_, 3u << 20) << "the second part references the first's weights";
  const std::string first_dir = SnapshotsPrefix(PartJob("job", 0)) + SeqName(first.parts[0].seq);
  const size_t before = Objects(first_dir);

  auto gc = CollectGroupGarbage(*store_, clock_, "job", GcOptions{1, std::chrono::hours(1)});
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->deleted, std::vector<uint64_t>{1});
  EXPECT_EQ(gc->parts_deleted, 2u);
  // The first part is no snapshot any more, and what only it used is gone...
  EXPECT_FALSE(store_->Head(ManifestKey(PartJob("job", 0), first.parts[0].seq)).ok());
  EXPECT_LT(Objects(first_dir), before);
  EXPECT_GT(Objects(first_dir), 0u) << "...but not the weights the second part references";
  // The kept group snapshot restores whole on both ranks.
  for (int rank = 0; rank < 2; ++rank) {
    const std::string target = dir_.Join("restored-" + std::to_string(rank));
    auto r =
        RestoreGroupPart(*store_, "job", Preset::kPytorch, second, rank, target, RestoreOptions{});
    ASSERT_TRUE(r.ok()) << rank << ": " << r.status().ToString();
    const Tree restored = ReadTree(target);
    EXPECT_EQ(restored.at("weights.bin").content, RandomBytes(3 << 20, 7 + rank));
    EXPECT_EQ(restored.at("state.json").content, "{\"step\": 20}");
  }
}

// A writer of the rank that is live (a claim and no manifest, younger than
// abandoned_after) may have indexed the part just uncommitted: nothing of it
// goes until that writer is done or abandoned.
TEST_F(GroupRetentionTest, NoObjectOfAnUncommittedPartGoesWhileAWriterOfTheRankIsLive) {
  const GroupCommit first = Commit(1, 10);
  Commit(2, 20);
  const std::string part_job = PartJob("job", 0);
  ASSERT_TRUE(store_->Put(ClaimKey(part_job, 9), "{}", PutCondition{}).ok());  // a live writer
  const std::string first_dir = SnapshotsPrefix(part_job) + SeqName(first.parts[0].seq);
  const size_t before = Objects(first_dir);

  auto gc = CollectGroupGarbage(*store_, clock_, "job", GcOptions{1, std::chrono::hours(1)});
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->parts_deleted, 2u);
  EXPECT_FALSE(store_->Head(ManifestKey(part_job, first.parts[0].seq)).ok()) << "uncommitted";
  EXPECT_GE(Objects(first_dir), before - 2) << "only its claim and manifest went";

  // Two hours on, the writer is abandoned: the unreferenced objects go.
  clock_.Advance(std::chrono::hours(2));
  auto later = CollectGroupGarbage(*store_, clock_, "job", GcOptions{1, std::chrono::hours(1)});
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_LT(Objects(first_dir), before - 2);
}

// A LoRA-style group (issue 34): each rank's part is a frozen base and an
// adapter of about 2% of it that changes every step. The second group
// snapshot stores at most 5% of the first's bytes, and a replacement of
// either rank restores its part of it byte-identical.
TEST_F(GroupRetentionTest, ALoraStyleGroupSnapshotStoresOnlyWhatChanged) {
  const uint64_t base_size = 2 * kFrameSize;
  auto lora = [&](int rank, int64_t step) {
    return Tree{{"base.bin", {RandomBytes(base_size, 40 + rank), 0644}},
                {"adapter.bin", {RandomBytes(base_size / 50, 50 + 10 * step + rank), 0644}}};
  };
  uint64_t first_stored = 0, second_new = 0;
  GroupCommit second;
  for (int64_t step : {1, 2}) {
    GroupCommit g;
    g.seq = g.round = g.generation = static_cast<uint64_t>(step);
    g.nodes = 2;
    g.step = step;
    g.created = "2026-11-29T00:00:00Z";
    for (int rank = 0; rank < 2; ++rank) {
      SnapshotResult written;
      g.parts.push_back(WriteTreePart(
          *store_, clock_, dir_.Join("lora-" + std::to_string(rank) + "-" + std::to_string(step)),
          lora(rank, step), rank, step, ".", &written));
      (step == 1 ? first_stored : second_new) +=
          step == 1 ? written.stored_bytes : written.new_bytes;
    }
    ASSERT_TRUE(GroupStore(*store_, "job").CommitGroup(g).ok());
    second = g;
  }
  ASSERT_GT(first_stored, 2 * base_size);
  EXPECT_LE(second_new * 100, first_stored * 5)
      << second_new << " new bytes against " << first_stored << " in the first group snapshot";
  for (int rank = 0; rank < 2; ++rank) {
    const std::string target = dir_.Join("replacement-" + std::to_string(rank));
    auto r =
        RestoreGroupPart(*store_, "job", Preset::kPytorch, second, rank, target, RestoreOptions{});
    ASSERT_TRUE(r.ok()) << rank << ": " << r.status().ToString();
    EXPECT_EQ(ReadTree(target), lora(rank, 2)) << rank;
  }
}

// Group retention never counts a group snapshot that needs a quarantined
// object among the `keep` good ones, as it treats a suspect one (docs/design.md
// §14, "Quarantine in a group"): with keep 1 the newest group snapshot whose
// parts need none stays. Once a good one is newer, the others go.
TEST_F(GroupRetentionTest, AGroupSnapshotThatNeedsAQuarantinedObjectIsNotCountedAsAKeptGoodOne) {
  Commit(1, 10);
  Commit(2, 20);
  const GroupCommit third = Commit(3, 30);
  const std::string state = ObjectOf(1, third.parts[1].seq, "state.json");
  QuarantineObjects(*store_, PartJob("job", 1), {state}, "verify", third.parts[1].seq,
                    "XXH3-128 does not match");
  const GcOptions keep_one{1, std::chrono::hours(1)};
  auto gc = CollectGroupGarbage(*store_, clock_, "job", keep_one);
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->deleted, std::vector<uint64_t>{1}) << "2 is the kept good one; 3 is newer";

  Commit(4, 40);
  gc = CollectGroupGarbage(*store_, clock_, "job", keep_one);
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->deleted, (std::vector<uint64_t>{2, 3}));
  EXPECT_FALSE(store_->Head(JobPrefix(PartJob("job", 1)) + state).ok())
      << "the damaged object goes once no kept part needs it";
}

// A part writer offers no frame of an object quarantined in its rank's part
// job: the next part uploads those frames afresh, while another rank, whose
// list is its own, still references its earlier part's frames.
TEST_F(GroupRetentionTest, APartWrittenAfterAQuarantineUploadsTheQuarantinedFramesAfresh) {
  const GroupCommit first = Commit(1, 10);
  const std::string weights = ObjectOf(0, first.parts[0].seq, "weights.bin");
  QuarantineObjects(*store_, PartJob("job", 0), {weights}, "restore", first.parts[0].seq,
                    "XXH3-128 does not match");
  SnapshotResult zero, one;
  const PartRecord part = WritePart(0, 20, &zero);
  const PartRecord other = WritePart(1, 20, &one);
  EXPECT_EQ(zero.reused_bytes, 0u);
  EXPECT_GE(zero.new_bytes, 3u << 20) << "the weights stored again";
  EXPECT_NE(ObjectOf(0, part.seq, "weights.bin"), weights);
  EXPECT_GE(one.reused_bytes, 3u << 20) << "rank 1's weights are not quarantined";
  EXPECT_EQ(ObjectOf(1, other.seq, "weights.bin"), ObjectOf(1, first.parts[1].seq, "weights.bin"));
}

// Each rank's parts are listed twice (the proof's two listings, docs/design.md
// §4) and its quarantine once: the collector of one node runs on the rank's
// parts with the retirement of the parts no kept group snapshot names, and
// group retention hands its quarantine read down (it listed the parts three
// times, and the quarantine twice, before).
TEST_F(GroupRetentionTest, ListsEachRanksPartsOnlyForTheProof) {
  Commit(1, 10);
  Commit(2, 20);
  FaultyStore counted(*store_);
  auto gc = CollectGroupGarbage(counted, clock_, "job", GcOptions{1, std::chrono::hours(1)});
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->parts_deleted, 2u);
  for (int rank : {0, 1}) {
    const std::string part = PartJob("job", rank);
    EXPECT_EQ(counted.listings_of(SnapshotsPrefix(part)), 2) << "rank " << rank;
    EXPECT_EQ(counted.listings_of(QuarantinePrefix(part)), 1) << "rank " << rank;
    EXPECT_EQ(counted.listings_of(FencesPrefix(part)), 1) << "rank " << rank;
  }
}

}  // namespace
}  // namespace sg::testing
