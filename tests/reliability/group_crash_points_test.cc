// Crash points of group commits and group retention (docs/design.md §4,
// "Retention with shared objects" and "Live writers"; §14), on the file://
// store, as tests/reliability/reuse_crash_test.cc does for one node: a group
// commit (both ranks' parts, then the group record) and group gc each die
// before every one of their writes in turn; a whole group gc runs before
// every write of a group commit, and a whole group commit before every
// operation of group gc. After each trial, and after the survivors' next
// group snapshot and gc, every part of every kept group snapshot must have
// all the objects it references, and the newest group snapshot must restore
// byte-identical on both ranks. Reported as "0 kept parts with a missing
// reference".
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "agent/repo/group_protocol.h"
#include "agent/repo/group_restore.h"
#include "agent/repo/group_retention.h"
#include "agent/repo/group_store.h"
#include "agent/repo/store_layout.h"
#include "common/file_store.h"
#include "tests/support/capture_in_place.h"
#include "tests/support/crash_points.h"
#include "tests/support/fake_clock.h"
#include "tests/support/reliability_record.h"
#include "tests/support/reuse_support.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

constexpr int kRanks = 2;
const GcOptions kKeepOneGroup{1, std::chrono::hours(1)};

class GroupCrashTrials : public CrashTrialStore {
 protected:
  // A fresh store with group snapshots of steps 10 and 20.
  void Fresh() {
    FreshStore();
    for (int64_t step : {10, 20}) ASSERT_TRUE(CommitGroupOf(*store_, step).ok());
  }

  // Rank `rank`'s checkpoint at `step`: frozen weights of its own (one
  // small frame), a state that changes every step, and a file that only
  // odd tens share, so the third group snapshot reuses objects that only
  // the first, which retention retires, holds.
  static Tree RankTree(int rank, int64_t step) {
    return {{"weights.bin", {std::string(kFrameSize / 8, static_cast<char>('a' + rank)), 0644}},
            {"state.json",
             {"{\"rank\": " + std::to_string(rank) + ", \"step\": " + std::to_string(step) + "}",
              0644}},
            {"config.json", {(step / 10) % 2 ? "odd tens" : "even tens", 0644}}};
  }

  // Both ranks' parts of `step`, then the group record, all through `store`.
  Status CommitGroupOf(ObjectStore& store, int64_t step) {
    GroupCommit g;
    g.nodes = kRanks;
    g.step = step;
    g.created = FormatUtc(clock_.Now());
    for (int rank = 0; rank < kRanks; ++rank) {
      const std::string src = dir_.Join("src-" + std::to_string(++sources_));
      WriteTree(src, RankTree(rank, step));
      SG_ASSIGN_OR_RETURN(CapturedCheckpoint capture, CaptureTree(src, step));
      SnapshotRequest request;
      request.job = PartJob("job", rank);
      request.instance = "i-" + std::to_string(rank);
      SG_ASSIGN_OR_RETURN(SnapshotResult part,
                          SnapshotWriter(store, clock_, SnapshotOptions{}).Write(capture, request));
      g.parts.push_back(
          PartRecord{rank, step, part.seq, request.instance, part.bytes, part.stored_bytes});
    }
    GroupStore group(store, "job");
    SG_ASSIGN_OR_RETURN(GroupListing listing, group.ListGroups());
    g.seq = listing.NextSeq();
    g.round = g.seq;
    g.generation = g.seq;
    SG_RETURN_IF_ERROR(group.CommitGroup(g));
    committed_step_[g.seq] = step;
    ++commits_;
    return Status::Ok();
  }

  Status GroupGc(ObjectStore& store) {
    return CollectGroupGarbage(store, clock_, "job", kKeepOneGroup).status();
  }

  // Every part of every kept group snapshot is there with all it
  // references; the newest group snapshot restores on both ranks.
  void Check(const std::string& when) {
    auto groups = GroupStore(*store_, "job").Groups();
    ASSERT_TRUE(groups.ok()) << when << ": " << groups.status().ToString();
    ASSERT_FALSE(groups->empty()) << when;
    int missing = 0;
    for (const GroupCommit& g : *groups) {
      for (const PartRecord& p : g.parts) {
        if (!store_->Head(ManifestKey(PartJob("job", p.rank), p.seq)).ok()) ++missing;
      }
    }
    for (int rank = 0; rank < kRanks; ++rank) {
      missing += CountMissingReferences(*store_, PartJob("job", rank));
    }
    EXPECT_EQ(missing, 0) << when;
    if (missing != 0) ++missing_total_;
    const GroupCommit& newest = groups->back();
    for (int rank = 0; rank < kRanks; ++rank) {
      const std::string out = dir_.Join("out-" + std::to_string(++restores_));
      auto r =
          RestoreGroupPart(*store_, "job", Preset::kPytorch, newest, rank, out, RestoreOptions{});
      ASSERT_TRUE(r.ok()) << when << ", rank " << rank << ": " << r.status().ToString();
      EXPECT_EQ(ReadTree(out), RankTree(rank, committed_step_[newest.seq])) << when;
      std::filesystem::remove_all(out);
    }
    ++checks_;
  }

  // What the survivors do next: another group snapshot and gc, then gc
  // again once the dead writers' claims are no longer live.
  void Recover(const std::string& when) {
    ASSERT_TRUE(CommitGroupOf(*store_, 90).ok()) << when;
    ASSERT_TRUE(GroupGc(*store_).ok()) << when;
    clock_.Advance(std::chrono::hours(2));
    ASSERT_TRUE(GroupGc(*store_).ok()) << when;
    Check(when + ", then a group snapshot, and gc two hours later");
  }

  std::map<uint64_t, int64_t> committed_step_;
};

TEST_F(GroupCrashTrials, ZeroKeptPartsWithAMissingReference) {
  // Group gc retires group snapshots 1 and 2 after a third, whose parts
  // reference objects of theirs; a group commit dies in a part's upload,
  // between the parts, or before the group record, and never commits.
  CrashPointPlan plan;
  plan.fresh = [&] { Fresh(); };
  plan.store = [&]() -> ObjectStore& { return *store_; };
  plan.write = [&](ObjectStore& store) { return CommitGroupOf(store, 30); };
  plan.collect = [&](ObjectStore& store) { return GroupGc(store); };
  plan.before_collect = [&] { return CommitGroupOf(*store_, 30); };
  plan.write_inside = [&] { return CommitGroupOf(*store_, 50); };
  plan.commits_when_killed = [](int, int) { return false; };
  plan.check = [&](const std::string& when) { Check(when); };
  plan.recover = [&](const std::string& when) { Recover(when); };
  const CrashPointCounts counts = RunCrashPoints(plan);
  EXPECT_GE(counts.writer_writes, 2 * 5 + 1);
  const int commit_writes = counts.writer_writes, gc_writes = counts.collector_writes;
  const int gc_ops = counts.collector_ops, injected = counts.injected;

  ReliabilityRecord rec;
  rec.test = "group_crash_points";
  rec.area = "crash";
  rec.faults =
      "groups: a group commit and group gc killed before each of their writes; group gc run "
      "before each write of a group commit; a group commit run before each operation of group gc";
  rec.trials = trial_;
  rec.faults_injected = injected;
  rec.committed = commits_;
  rec.restored = checks_ * kRanks;
  rec.lost = missing_total_ + (::testing::Test::HasFailure() ? 1 : 0);
  rec.detail = std::to_string(missing_total_) +
               " checks with a kept part missing a reference, of " + std::to_string(checks_) +
               " (group commit " + std::to_string(commit_writes) + " writes, group gc " +
               std::to_string(gc_writes) + " writes and " + std::to_string(gc_ops) + " operations)";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
  std::printf("%s\n", rec.detail.c_str());
}

}  // namespace
}  // namespace sg::testing
