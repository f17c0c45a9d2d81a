// Crash trials of frame reuse (docs/design.md §4, "Retention with shared
// objects"), on the file:// store: a writer and gc each die before every one
// of their writes in turn, and gc runs to the end before every write of a
// writer and a writer before every step of gc. After each trial, and after
// the survivors' next snapshot and gc (for the interleavings only with
// SPOTGUARD_LONG_TESTS=1), every kept snapshot must have all the objects it
// references, and the newest must restore byte-identical.
// Reported as "0 kept snapshots with a missing reference".
#include <gtest/gtest.h>

#include <filesystem>

#include "agent/repo/restorer.h"
#include "agent/repo/retention.h"
#include "agent/repo/snapshot_writer.h"
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

constexpr uint64_t kF = kFrameSize;
const GcOptions kKeepOne{1, std::chrono::hours(1)};

class ReuseCrashTrials : public CrashTrialStore {
 protected:
  // A fresh store with snapshots 1 and 2 of a LoRA-style checkpoint.
  void Fresh() {
    FreshStore();
    for (int step = 1; step <= 2; ++step) ASSERT_TRUE(Commit(*store_, step).ok());
  }
  static Tree Lora(int step) {
    // A frozen base (one frame, small, so the trials stay fast) and an
    // adapter that changes at every step.
    return {{"base.bin", {std::string(kF / 8, 'b') + std::string(kF / 16, 'B'), 0644}},
            {"adapter.bin", {"adapter of step " + std::to_string(step), 0644}},
            // Odd steps share a file that even steps lack: snapshot 3 reuses
            // an object that only snapshot 1, which gc retires, holds.
            {"config.json", {step % 2 ? "odd steps" : "even steps", 0644}}};
  }
  StatusOr<SnapshotResult> Commit(ObjectStore& store, int step) {
    const std::string src = dir_.Join("src-" + std::to_string(++sources_));
    WriteTree(src, Lora(step));
    SnapshotRequest req;
    req.job = "job";
    req.instance = "i-trial";
    SG_ASSIGN_OR_RETURN(CapturedCheckpoint capture, CaptureTree(src, std::nullopt));
    SnapshotWriter writer(store, clock_, SnapshotOptions{});
    auto r = writer.Write(capture, req);
    if (r.ok()) {
      committed_step_[r->seq] = step;
      ++commits_;
    }
    return r;
  }
  // Every kept snapshot whole; the newest restores as it was committed.
  void Check(const std::string& when) {
    const int missing = CountMissingReferences(*store_, "job");
    EXPECT_EQ(missing, 0) << when;
    if (missing != 0) ++missing_total_;
    Restorer restorer(*store_, RestoreOptions{});
    const std::string out = dir_.Join("out-" + std::to_string(++restores_));
    auto r = restorer.Restore("job", out, std::nullopt);
    ASSERT_TRUE(r.ok()) << when << ": " << r.status().ToString();
    EXPECT_TRUE(r->rejected.empty()) << when << ": " << r->rejected.front();
    EXPECT_EQ(ReadTree(out), Lora(committed_step_[r->seq])) << when;
    std::filesystem::remove_all(out);
    ++checks_;
  }
  // What the survivors do next: another snapshot, then gc, later once the
  // dead writer's dir is old.
  void Recover(const std::string& when) {
    ASSERT_TRUE(Commit(*store_, 9).ok()) << when;
    ASSERT_TRUE(CollectGarbage(*store_, clock_, "job", kKeepOne).ok()) << when;
    if (LongReliabilityRun()) Check(when + ", then a snapshot and gc");
    clock_.Advance(std::chrono::hours(2));
    ASSERT_TRUE(CollectGarbage(*store_, clock_, "job", kKeepOne).ok()) << when;
    Check(when + ", then gc two hours later");
  }

  std::map<uint64_t, int> committed_step_;
};

TEST_F(ReuseCrashTrials, ZeroKeptSnapshotsWithAMissingReference) {
  // gc retires snapshot 1, whose base snapshot 2 references, and snapshot 2
  // after a third; the writer indexed snapshots 1 and 2 right after its claim.
  CrashPointPlan plan;
  plan.fresh = [&] { Fresh(); };
  plan.store = [&]() -> ObjectStore& { return *store_; };
  plan.write = [&](ObjectStore& store) { return Commit(store, 3).status(); };
  plan.collect = [&](ObjectStore& store) {
    return CollectGarbage(store, clock_, "job", kKeepOne).status();
  };
  plan.before_collect = [&] { return Commit(*store_, 3).status(); };
  plan.write_inside = [&] { return Commit(*store_, 4).status(); };
  // Killed before its last write (`latest`), the snapshot is committed.
  plan.commits_when_killed = [](int n, int writes) { return n == writes; };
  plan.check = [&](const std::string& when) { Check(when); };
  plan.recover = [&](const std::string& when) { Recover(when); };
  plan.recover_interleavings = LongReliabilityRun();
  const CrashPointCounts counts = RunCrashPoints(plan);
  const int writer_writes = counts.writer_writes, gc_writes = counts.collector_writes;
  const int injected = counts.injected;

  ReliabilityRecord rec;
  rec.test = "reuse_crash_trials";
  rec.area = "crash";
  rec.faults =
      "frame reuse: writer and gc killed before each of their writes; gc run before each "
      "write of a writer; a writer run before each operation of gc";
  rec.trials = trial_;
  rec.faults_injected = injected;
  rec.committed = commits_;
  rec.restored = checks_;
  rec.lost = missing_total_ + (::testing::Test::HasFailure() ? 1 : 0);
  rec.detail = std::to_string(missing_total_) + " kept snapshots with a missing reference in " +
               std::to_string(checks_) + " checks (writer " + std::to_string(writer_writes) +
               " writes, gc " + std::to_string(gc_writes) + " writes)";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
  std::printf("%s\n", rec.detail.c_str());
}

}  // namespace
}  // namespace sg::testing
