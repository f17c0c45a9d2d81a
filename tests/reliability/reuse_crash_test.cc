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
#include "tests/support/fake_clock.h"
#include "tests/support/reliability_record.h"
#include "tests/support/reuse_support.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

constexpr uint64_t kF = kFrameSize;
const GcOptions kKeepOne{1, std::chrono::hours(1)};

class ReuseCrashTrials : public ::testing::Test {
 protected:
  // A fresh store with snapshots 1 and 2 of a LoRA-style checkpoint.
  void Fresh() {
    ++trial_;
    store_.reset();
    std::filesystem::remove_all(dir_.Join("store"));
    clock_.SetNow(std::chrono::system_clock::now());
    auto opened = FileStore::Open(dir_.Join("store"));
    ASSERT_TRUE(opened.ok());
    store_ = std::move(*opened);
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

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<FileStore> store_;
  std::map<uint64_t, int> committed_step_;
  int commits_ = 0, sources_ = 0, restores_ = 0, trial_ = 0, checks_ = 0, missing_total_ = 0;
};

TEST_F(ReuseCrashTrials, ZeroKeptSnapshotsWithAMissingReference) {
  // How many writes a writer and a gc make when nothing fails.
  Fresh();
  StepStore count_writer(*store_);
  ASSERT_TRUE(Commit(count_writer, 3).ok());
  const int writer_writes = count_writer.writes();
  StepStore count_gc(*store_);
  ASSERT_TRUE(CollectGarbage(count_gc, clock_, "job", kKeepOne).ok());
  const int gc_writes = count_gc.writes();
  ASSERT_GE(writer_writes, 5);
  ASSERT_GE(gc_writes, 4);
  int injected = 0;

  // 1. The writer dies before each of its writes.
  for (int n = 1; n <= writer_writes; ++n) {
    Fresh();
    StepStore dying(*store_);
    dying.DieAtWrite(n);
    // Killed before its last write (`latest`), the snapshot is committed.
    EXPECT_EQ(Commit(dying, 3).ok(), n == writer_writes) << n;
    ++injected;
    Check("writer killed before write " + std::to_string(n));
    Recover("writer killed before write " + std::to_string(n));
  }
  // 2. gc (retiring snapshot 1, whose base snapshot 2 references, and
  // snapshot 2 after a third) dies before each of its writes.
  for (int n = 1; n <= gc_writes; ++n) {
    Fresh();
    ASSERT_TRUE(Commit(*store_, 3).ok());
    StepStore dying(*store_);
    dying.DieAtWrite(n);
    EXPECT_FALSE(CollectGarbage(dying, clock_, "job", kKeepOne).ok()) << n;
    ++injected;
    Check("gc killed before write " + std::to_string(n));
    Recover("gc killed before write " + std::to_string(n));
  }
  // 3. A whole gc runs before each write of a writer (which indexed
  // snapshots 1 and 2 right after its claim).
  for (int n = 1; n <= writer_writes; ++n) {
    Fresh();
    StepStore racing(*store_);
    int writes = 0;
    racing.BeforeStep([&](const StepStore::Op& op) {
      if (op.kind == StepStore::Kind::kGet || op.kind == StepStore::Kind::kHead ||
          op.kind == StepStore::Kind::kList || op.kind == StepStore::Kind::kClean) {
        return;
      }
      if (++writes == n) {
        EXPECT_TRUE(CollectGarbage(*store_, clock_, "job", kKeepOne).ok());
      }
    });
    EXPECT_TRUE(Commit(racing, 3).ok()) << n;
    ++injected;
    Check("gc before writer's write " + std::to_string(n));
    if (LongReliabilityRun()) Recover("gc before writer's write " + std::to_string(n));
  }
  // 4. A whole writer runs before each operation of gc (reads included:
  // between its listings too).
  Fresh();
  StepStore count_ops(*store_);
  int gc_ops = 0;
  count_ops.BeforeStep([&](const StepStore::Op&) { ++gc_ops; });
  ASSERT_TRUE(CollectGarbage(count_ops, clock_, "job", kKeepOne).ok());
  for (int n = 1; n <= gc_ops + 2; ++n) {
    Fresh();
    StepStore racing(*store_);
    int ops = 0;
    racing.BeforeStep([&](const StepStore::Op&) {
      if (++ops == n) {
        EXPECT_TRUE(Commit(*store_, 3).ok());
      }
    });
    EXPECT_TRUE(CollectGarbage(racing, clock_, "job", kKeepOne).ok()) << n;
    ++injected;
    Check("writer before gc's operation " + std::to_string(n));
    if (LongReliabilityRun()) Recover("writer before gc's operation " + std::to_string(n));
  }

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
