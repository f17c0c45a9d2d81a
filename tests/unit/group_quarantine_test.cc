// Quarantine in a job of several nodes (agent/repo/group_quarantine.h;
// docs/design.md §14, "Quarantine in a group"), on a file:// store: `verify`
// of a group quarantines a damaged part's object in its rank's part job and
// names it; `ls` and `status` mark the group snapshots that need it; and
// `restore --rank` without a seq passes over them.
#include "agent/repo/group_quarantine.h"
#include "agent/repo/group_suspect.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent/cli/group_commands.h"
#include "agent/cli/group_status.h"
#include "agent/config/exit_codes.h"
#include "agent/repo/group_store.h"
#include "agent/repo/quarantine.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/store_layout.h"
#include "tests/support/file_store_fixture.h"
#include "tests/support/group_records.h"

namespace sg::testing {
namespace {

class GroupQuarantineTest : public FileStoreTest {
 protected:
  void SetUp() override {
    FileStoreTest::SetUp();
    config_.job = "job";
    config_.nodes = 2;
  }

  static Tree PartTree(int rank, int64_t step) {
    return {{"step_" + std::to_string(step) + ".pt",
             {"rank " + std::to_string(rank) + " step " + std::to_string(step)}}};
  }

  // Group snapshot `seq` of two parts of `step`.
  GroupCommit Commit(uint64_t seq, int64_t step) {
    GroupCommit g = GroupRecordOf(seq, 2, step);
    for (int rank = 0; rank < 2; ++rank) {
      g.parts.push_back(WriteTreePart(
          *store_, clock_, dir_.Join("part-" + std::to_string(rank) + "-" + std::to_string(step)),
          PartTree(rank, step), rank, step));
    }
    EXPECT_TRUE(GroupStore(*store_, "job").CommitGroup(g).ok());
    return g;
  }

  // The object of rank `rank`'s part of `g`, relative to its part job.
  std::string ObjectOf(const GroupCommit& g, int rank) {
    auto m = SnapshotCatalog(*store_, PartJob("job", rank)).ReadManifest(g.parts[rank].seq);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? m->files.at(0).frames.at(0).key : "";
  }

  void Damage(int rank, const std::string& key) {
    const std::string full = JobPrefix(PartJob("job", rank)) + key;
    ObjectStore& store = *store_;
    auto body = store.Get(full);
    ASSERT_TRUE(body.ok()) << body.status().ToString();
    (*body)[body->size() / 2] ^= 0x20;
    ASSERT_TRUE(store_->Put(full, *body, PutCondition::None()).ok());
  }

  // restore --rank without --snapshot, for each rank: its part of `step`.
  void ExpectEveryRankRestoresStep(int64_t step) {
    for (int rank = 0; rank < 2; ++rank) {
      const std::string target = dir_.Join("restored-" + std::to_string(rank));
      Output r = Capture([&] {
        return RunGroupRestore(config_, *store_, std::nullopt, rank, target, /*force=*/false);
      });
      ASSERT_EQ(r.code, kExitOk) << r.err;
      EXPECT_EQ(ReadTree(target), PartTree(rank, step)) << "rank " << rank;
    }
  }

  struct Output {
    int code = 0;
    std::string out, err;
  };
  template <typename Run>
  static Output Capture(Run run) {
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    Output o;
    o.code = run();
    o.out = ::testing::internal::GetCapturedStdout();
    o.err = ::testing::internal::GetCapturedStderr();
    return o;
  }

  Config config_;
};

TEST_F(GroupQuarantineTest, VerifyQuarantinesADamagedPartObjectAndEveryCommandNamesIt) {
  Commit(1, 10);
  const GroupCommit second = Commit(2, 20);
  const std::string key = ObjectOf(second, 1);
  const std::string named = "nodes/1/" + key;
  Damage(1, key);

  // verify reads every part back, quarantines the damaged object in rank
  // 1's part job and names it relative to the job.
  Output v = Capture([&] { return RunGroupVerify(config_, *store_, std::nullopt); });
  EXPECT_EQ(v.code, kExitFailure) << v.err;
  EXPECT_NE(
      v.out.find("quarantined " + named + ": found damaged now, in group snapshot " + "0000000002"),
      std::string::npos)
      << v.out;
  EXPECT_NE(v.err.find("group snapshot 0000000002 is damaged: rank 1"), std::string::npos) << v.err;
  auto listed = ReadQuarantine(*store_, PartJob("job", 1));
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(*listed, std::set<std::string>{key});
  auto zero = ReadQuarantine(*store_, PartJob("job", 0));
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->empty());
  // The older group snapshot is whole; the object is still named.
  v = Capture([&] { return RunGroupVerify(config_, *store_, 1); });
  EXPECT_EQ(v.code, kExitOk) << v.err;
  EXPECT_NE(v.out.find("quarantined " + named + "\n"), std::string::npos) << v.out;

  // ls marks the group snapshot that needs it, text and --json.
  Output ls = Capture([&] { return RunGroupLs(config_, *store_, /*json=*/true); });
  ASSERT_EQ(ls.code, kExitOk) << ls.err;
  const auto rows = nlohmann::json::parse(ls.out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["seq"], 2);
  EXPECT_EQ(rows[0]["quarantined"], nlohmann::json::array({named}));
  EXPECT_EQ(rows[1]["quarantined"], nlohmann::json::array());
  ls = Capture([&] { return RunGroupLs(config_, *store_, /*json=*/false); });
  ASSERT_EQ(ls.code, kExitOk) << ls.err;
  const size_t header = ls.out.find("SUSPECT  QUARANTINED\n");
  const size_t row2 = ls.out.find("0000000002"), row1 = ls.out.find("0000000001");
  ASSERT_NE(header, std::string::npos) << ls.out;
  ASSERT_NE(row2, std::string::npos);
  ASSERT_NE(row1, std::string::npos);
  EXPECT_EQ(ls.out.substr(ls.out.find('\n', row2) - 3, 3), "yes") << ls.out;
  EXPECT_EQ(ls.out.substr(ls.out.find('\n', row1) - 1, 1), "-") << ls.out;

  // status names it, and says the newest group snapshot needs it.
  auto status = GroupStatusJson(config_, *store_);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ((*status)["quarantined"], nlohmann::json::array({named}));
  EXPECT_EQ((*status)["newest_group_snapshot"]["quarantined"], nlohmann::json::array({named}));
  EXPECT_NE(GroupStatusText(*status).find("quarantined: " + named + ": found damaged"),
            std::string::npos)
      << GroupStatusText(*status);

  // restore --rank without a seq passes over group snapshot 2, for every rank.
  ExpectEveryRankRestoresStep(10);  // group snapshot 1's parts
  // With the seq, exactly that one: rank 0's part of 2 is whole.
  const std::string exact = dir_.Join("exact");
  Output r = Capture([&] { return RunGroupRestore(config_, *store_, 2, 0, exact, false); });
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(ReadTree(exact), PartTree(0, 20));
}

// A group snapshot whose parts read back whole but need a quarantined
// object (its damage lies in frames they do not use) fails verify too.
TEST_F(GroupQuarantineTest, VerifyFailsAGroupSnapshotThatNeedsAQuarantinedObject) {
  const GroupCommit g = Commit(1, 10);
  const std::string key = ObjectOf(g, 0);
  QuarantineObjects(*store_, PartJob("job", 0), {key}, "restore", 1, "XXH3-128 does not match");
  Output v = Capture([&] { return RunGroupVerify(config_, *store_, std::nullopt); });
  EXPECT_EQ(v.code, kExitFailure) << v.err;
  EXPECT_NE(v.out.find("quarantined nodes/0/" + key + ": needed by group snapshot 0000000001"),
            std::string::npos)
      << v.out;
  EXPECT_NE(v.err.find("reads back whole but needs the quarantined object(s) nodes/0/" + key),
            std::string::npos)
      << v.err;
}

// restore --rank without a seq chooses as a round would: a group snapshot
// marked suspect (no round could resume from it) is passed over, the same
// for every rank; with --snapshot, exactly that one.
TEST_F(GroupQuarantineTest, RestoreOfARankPassesOverASuspectGroupSnapshot) {
  Commit(1, 10);
  Commit(2, 20);
  ASSERT_TRUE(MarkGroupSuspect(*store_, "job", 2, {{"why", "test"}}).ok());
  ExpectEveryRankRestoresStep(10);  // group snapshot 1's parts
  const std::string exact = dir_.Join("exact");
  Output r = Capture([&] { return RunGroupRestore(config_, *store_, 2, 1, exact, false); });
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(ReadTree(exact), PartTree(1, 20));
}

}  // namespace
}  // namespace sg::testing
