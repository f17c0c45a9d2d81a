// RestoreGroupPart (agent/repo/group_restore.h) on a file:// store: a node gets
// its own part of a group snapshot, and with the dcp preset also rank 0's
// `.metadata`, which DCP's reader needs on every node.
#include "agent/repo/group_restore.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "agent/repo/group_quarantine.h"
#include "agent/repo/quarantine.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/store_layout.h"
#include "common/files.h"
#include "tests/support/file_store_fixture.h"
#include "tests/support/group_records.h"

namespace sg::testing {
namespace {

class GroupRestoreTest : public FileStoreTest {
 protected:
  // Commits `tree` as rank `rank`'s part of step 10, resumed from "step_10".
  PartRecord CommitPart(int rank, const Tree& tree) {
    return WriteTreePart(*store_, clock_, dir_.Join("part-" + std::to_string(rank)), tree, rank, 10,
                         "step_10");
  }

  GroupCommit TwoNodes() {
    GroupCommit g;
    g.seq = 1;
    g.nodes = 2;
    g.step = 10;
    g.parts = {CommitPart(0, {{"step_10/__0_0.distcp", {"rank zero's shard"}},
                              {"step_10/.metadata", {"the plan of every shard"}}}),
               CommitPart(1, {{"step_10/__1_0.distcp", {"rank one's shard"}},
                              {"step_10/node_1.done", {""}}})};
    return g;
  }

  Tree Restored(Preset preset, int rank, const GroupCommit& g) {
    const std::string target = dir_.Join("restored-" + std::to_string(++targets_));
    auto r = RestoreGroupPart(*store_, "job", preset, g, rank, target, RestoreOptions{});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) {
      EXPECT_EQ(r->resume_path, target + "/step_10");
    }
    return ReadTree(target);
  }

  int targets_ = 0;
};

TEST_F(GroupRestoreTest, WithDcpEveryNodeGetsItsOwnShardsAndRankZerosMetadata) {
  const GroupCommit g = TwoNodes();
  const Tree one = Restored(Preset::kDcp, 1, g);
  EXPECT_EQ(one.size(), 3u);
  EXPECT_EQ(one.at("step_10/__1_0.distcp").content, "rank one's shard");
  EXPECT_EQ(one.at("step_10/.metadata").content, "the plan of every shard");
  EXPECT_FALSE(one.contains("step_10/__0_0.distcp")) << "only its own part, and what all need";
  const Tree zero = Restored(Preset::kDcp, 0, g);
  EXPECT_EQ(zero.size(), 2u);
  EXPECT_EQ(zero.at("step_10/.metadata").content, "the plan of every shard");
}

TEST_F(GroupRestoreTest, OtherPresetsRestoreThePartAlone) {
  const Tree one = Restored(Preset::kPytorch, 1, TwoNodes());
  EXPECT_EQ(one.size(), 2u);
  EXPECT_FALSE(one.contains("step_10/.metadata"));
}

TEST_F(GroupRestoreTest, ADamagedMetadataFailsTheRestoreBeforeTheTargetChanges) {
  const GroupCommit g = TwoNodes();
  // Every object of rank 0's part rewritten with other bytes of the same size.
  auto objects = ListAll(*store_, "job/nodes/0/snapshots/");
  ASSERT_TRUE(objects.ok());
  int damaged = 0;
  for (const ObjectInfo& o : *objects) {
    if (o.key.find("/files/") == std::string::npos && o.key.find("/packs/") == std::string::npos) {
      continue;
    }
    ObjectStore& store = *store_;
    auto body = store.Get(o.key);
    ASSERT_TRUE(body.ok());
    std::string bytes = *body;
    bytes[bytes.size() - 1] ^= 0x5a;
    ASSERT_TRUE(store_->Put(o.key, bytes, PutCondition::None()).ok());
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  const std::string target = dir_.Join("damaged");
  auto r = RestoreGroupPart(*store_, "job", Preset::kDcp, g, 1, target, RestoreOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reading rank 0's .metadata of group snapshot"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(target)) << "nothing restored before the failure";
  // The damaged object is quarantined in rank 0's part job, whose part
  // holds it (docs/design.md §14, "Quarantine in a group").
  auto zero = ReadQuarantine(*store_, PartJob("job", 0));
  ASSERT_TRUE(zero.ok()) << zero.status().ToString();
  ASSERT_EQ(zero->size(), 1u);
  EXPECT_NE(zero->begin()->find(".metadata"), std::string::npos) << *zero->begin();
  auto one = ReadQuarantine(*store_, PartJob("job", 1));
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(one->empty());
}

// A part's own damaged object (here: gone) fails its restore and is
// quarantined in its rank's part job, as one node's restore does.
TEST_F(GroupRestoreTest, APartsDamagedObjectIsQuarantinedInItsRanksPartJob) {
  const GroupCommit g = TwoNodes();
  const std::string part_job = PartJob("job", 1);
  auto m = SnapshotCatalog(*store_, part_job).ReadManifest(g.parts[1].seq);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::string lost;
  for (const ManifestFile& f : m->files) {
    if (f.path == "step_10/__1_0.distcp") lost = f.frames.at(0).key;
  }
  ASSERT_FALSE(lost.empty());
  ASSERT_TRUE(store_->Delete(JobPrefix(part_job) + lost).ok());
  auto r =
      RestoreGroupPart(*store_, "job", Preset::kPytorch, g, 1, dir_.Join("lost"), RestoreOptions{});
  ASSERT_FALSE(r.ok());
  auto q = ReadQuarantine(*store_, part_job);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(*q, std::set<std::string>{lost});
  auto read = ReadGroupQuarantine(*store_, "job", {g});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->Seqs(), std::set<uint64_t>{1});
  EXPECT_EQ(read->needs.at(1), std::vector<std::string>{PartRelativeKey(1, lost)});
  EXPECT_EQ(read->AllKeys(), std::vector<std::string>{"nodes/1/" + lost});
}

}  // namespace
}  // namespace sg::testing
