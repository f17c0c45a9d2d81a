// The driven crash points of a writer and a collector that share a store
// (docs/design.md §4, "Retention with shared objects"): each dies before
// every one of its writes in turn; the collector runs whole before each
// write of the writer; the writer runs whole before each operation of the
// collector (its reads too: between its listings). One node's snapshots and
// a group's (tests/reliability/reuse_crash_test.cc,
// tests/reliability/group_crash_points_test.cc) run the same four kinds.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include <chrono>
#include <filesystem>
#include <memory>

#include "common/file_store.h"
#include "common/object_store.h"
#include "tests/support/fake_clock.h"
#include "tests/support/reuse_support.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {

struct CrashPointPlan {
  // A fresh store holding the history the trials start from.
  std::function<void()> fresh;
  std::function<ObjectStore&()> store;
  // The writer and the collector, through the store given.
  std::function<Status(ObjectStore&)> write;
  std::function<Status(ObjectStore&)> collect;
  // What the writer commits before the collector runs in kinds 2 and 4,
  // and the writer that runs whole inside the collector in kind 4.
  std::function<Status()> before_collect;
  std::function<Status()> write_inside;
  // Whether the writer killed before its write `n` of `writes` still
  // commits (one node: killed before `latest`, its last, it has).
  std::function<bool(int n, int writes)> commits_when_killed;
  // After each trial: the checks, then (kinds 1 and 2, and 3 and 4 when
  // `recover_interleavings`) what the survivors do next.
  std::function<void(const std::string& when)> check;
  std::function<void(const std::string& when)> recover;
  bool recover_interleavings = false;
};

// The ground of both trials: a file:// store made afresh for each trial, a
// FakeClock set to now (the store dates objects by real mtimes), and the
// tallies their reliability records report.
class CrashTrialStore : public ::testing::Test {
 protected:
  // An empty store, for trial number ++trial_.
  void FreshStore() {
    ++trial_;
    store_.reset();
    std::filesystem::remove_all(dir_.Join("store"));
    clock_.SetNow(std::chrono::system_clock::now());
    auto opened = FileStore::Open(dir_.Join("store"));
    ASSERT_TRUE(opened.ok());
    store_ = std::move(*opened);
  }

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<FileStore> store_;
  int commits_ = 0, sources_ = 0, restores_ = 0, trial_ = 0, checks_ = 0, missing_total_ = 0;
};

struct CrashPointCounts {
  int writer_writes = 0, collector_writes = 0, collector_ops = 0, injected = 0;
};

inline bool IsStoreWrite(StepStore::Kind kind) {
  return kind == StepStore::Kind::kPut || kind == StepStore::Kind::kDelete ||
         kind == StepStore::Kind::kNewWriter || kind == StepStore::Kind::kAppend ||
         kind == StepStore::Kind::kCommit;
}

inline CrashPointCounts RunCrashPoints(const CrashPointPlan& p) {
  CrashPointCounts c;
  // How many writes each makes, and how many operations the collector
  // makes, when nothing fails, from the state of their trials.
  p.fresh();
  StepStore count_writer(p.store());
  EXPECT_TRUE(p.write(count_writer).ok());
  c.writer_writes = count_writer.writes();
  p.fresh();
  EXPECT_TRUE(p.before_collect().ok());
  StepStore count_collector(p.store());
  int ops = 0;
  count_collector.BeforeStep([&](const StepStore::Op&) { ++ops; });
  EXPECT_TRUE(p.collect(count_collector).ok());
  c.collector_writes = count_collector.writes();
  c.collector_ops = ops;
  EXPECT_GE(c.writer_writes, 5);
  EXPECT_GE(c.collector_writes, 4);
  auto after = [&](const std::string& when, bool recover) {
    ++c.injected;
    p.check(when);
    if (recover) p.recover(when);
  };
  // 1. The writer dies before each of its writes.
  for (int n = 1; n <= c.writer_writes; ++n) {
    p.fresh();
    StepStore dying(p.store());
    dying.DieAtWrite(n);
    EXPECT_EQ(p.write(dying).ok(), p.commits_when_killed(n, c.writer_writes)) << n;
    after("writer killed before write " + std::to_string(n), true);
  }
  // 2. The collector dies before each of its writes.
  for (int n = 1; n <= c.collector_writes; ++n) {
    p.fresh();
    EXPECT_TRUE(p.before_collect().ok());
    StepStore dying(p.store());
    dying.DieAtWrite(n);
    EXPECT_FALSE(p.collect(dying).ok()) << n;
    after("collector killed before write " + std::to_string(n), true);
  }
  // 3. A whole collector runs before each write of the writer.
  for (int n = 1; n <= c.writer_writes; ++n) {
    p.fresh();
    StepStore racing(p.store());
    int writes = 0;
    racing.BeforeStep([&](const StepStore::Op& op) {
      if (IsStoreWrite(op.kind) && ++writes == n) {
        EXPECT_TRUE(p.collect(p.store()).ok());
      }
    });
    EXPECT_TRUE(p.write(racing).ok()) << n;
    after("collector before the writer's write " + std::to_string(n), p.recover_interleavings);
  }
  // 4. A whole writer runs before each operation of the collector.
  for (int n = 1; n <= c.collector_ops + 2; ++n) {
    p.fresh();
    EXPECT_TRUE(p.before_collect().ok());
    StepStore racing(p.store());
    int at = 0;
    racing.BeforeStep([&](const StepStore::Op&) {
      if (++at == n) {
        EXPECT_TRUE(p.write_inside().ok());
      }
    });
    EXPECT_TRUE(p.collect(racing).ok()) << n;
    after("writer before the collector's operation " + std::to_string(n), p.recover_interleavings);
  }
  return c;
}

}  // namespace sg::testing
