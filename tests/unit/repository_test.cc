// The repository (docs/design.md §4, "The repository"): the one owner of a
// job's keys. The keys keep the format docs/format.md describes (a store
// written by an older agent stays readable), the records the other
// subsystems keep go through it, and `run`'s start lists the history once.
#include "agent/repo/repository.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "agent/ledger/events.h"
#include "agent/repo/fencing.h"
#include "agent/repo/lease.h"
#include "agent/repo/store_layout.h"
#include "agent/run/job_start.h"
#include "common/sd_notify.h"
#include "tests/support/capture_in_place.h"
#include "tests/support/fake_clock.h"
#include "tests/support/faulty_store.h"
#include "tests/support/generic_config.h"
#include "tests/support/memory_store.h"
#include "tests/support/random_bytes.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

// Every key, spelled out: a change here breaks every store already written.
TEST(StoreLayoutTest, EveryKeyKeepsItsFormat) {
  EXPECT_EQ(ManifestKey("job", 7), "job/snapshots/0000000007/manifest.json");
  EXPECT_EQ(ClaimKey("job", 7), "job/snapshots/0000000007/claim");
  EXPECT_EQ(SuspectKey("job", 7), "job/snapshots/0000000007/suspect.json");
  EXPECT_EQ(FileObjectKey(7, "a/b.pt", Codec::kZstd), "snapshots/0000000007/files/a/b.pt.zst");
  EXPECT_EQ(PackObjectKey(7, 2), "snapshots/0000000007/packs/pack-000002.zst");
  EXPECT_EQ(SnapshotObjectsPrefix(7), "snapshots/0000000007/");
  EXPECT_EQ(LatestKey("job"), "job/latest");
  EXPECT_EQ(LeaseKey("job"), "job/lease");
  EXPECT_EQ(CompleteKey("job"), "job/complete");
  EXPECT_EQ(FenceKey("job", Fence{3, 12}), "job/fences/0000000003-0000000012");
  EXPECT_EQ(QuarantineKey("job", "snapshots/0000000007/files/x.zst"),
            "job/quarantine/snapshots/0000000007/files/x.zst.json");
  EXPECT_EQ(EventKey("job", "20261122T082200.123Z", "notice"),
            "job/events/20261122T082200.123Z-notice.json");
  EXPECT_EQ(LogSegmentKey("job", LogSegmentName{"i-1", 2, 3, "20261122T082200.123Z"}),
            "job/logs/i-1/0000000002-0000000003-20261122T082200.123Z.log.zst");
  EXPECT_EQ(DoctorProbePrefix("job", "ab12"), "job/.doctor/ab12/");
  EXPECT_EQ(DoctorProbePrefix("", "ab12"), ".doctor/ab12/");
  // A job of several nodes.
  EXPECT_EQ(PartJob("job", 1), "job/nodes/1");
  EXPECT_EQ(PartRelativeKey(1, "snapshots/0000000002/files/x.zst"),
            "nodes/1/snapshots/0000000002/files/x.zst");
  EXPECT_EQ(GroupMemberKey("job", "i-1"), "job/group/members/i-1.json");
  EXPECT_EQ(GroupRefusalKey("job", "i-1"), "job/group/refused/i-1.json");
  EXPECT_EQ(GroupFailureKey("job"), "job/group/failed.json");
  EXPECT_EQ(GroupSuspectKey("job", 4), "job/group/suspect/0000000004.json");
  EXPECT_EQ(GroupPlanKey("job", 5), "job/group/rounds/0000000005/plan.json");
  EXPECT_EQ(GroupFinalKey("job", 5), "job/group/rounds/0000000005/final.json");
  EXPECT_EQ(RoundEndKey("job", 5, "i-2"), "job/group/rounds/0000000005/end/i-2.json");
  EXPECT_EQ(RoundPartKey("job", 5, 10, 1, 3),
            "job/group/rounds/0000000005/parts/09223372036854775818-1-0000000003.json");
  EXPECT_EQ(RoundPartKey("job", 5, -1, 0, 3),
            "job/group/rounds/0000000005/parts/09223372036854775807-0-0000000003.json");
  EXPECT_EQ(RoundRankKey("job", 5, RoundRecords::kDone, 1),
            "job/group/rounds/0000000005/done/1.json");
  EXPECT_EQ(RoundRankKey("job", 5, RoundRecords::kAsked, 1),
            "job/group/rounds/0000000005/asked/1.json");
  EXPECT_EQ(RoundRankKey("job", 5, RoundRecords::kFlush, 1),
            "job/group/rounds/0000000005/flush/1.json");
  EXPECT_EQ(GroupKey("job", 6), "job/groups/0000000006.json");
}

TEST(StoreLayoutTest, ParsesOnlyItsOwnKeys) {
  EXPECT_EQ(RoundOfPlanKey("job", "job/group/rounds/0000000005/plan.json"), 5u);
  EXPECT_EQ(RoundOfPlanKey("job", "job/group/rounds/0000000005/final.json"), std::nullopt);
  EXPECT_EQ(RoundOfPlanKey("job", "other/group/rounds/0000000005/plan.json"), std::nullopt);
  EXPECT_EQ(GroupSeqOfKey("job", "job/groups/0000000006.json"), 6u);
  EXPECT_EQ(GroupSeqOfKey("job", "job/groups/x/0000000006.json"), std::nullopt);
  EXPECT_EQ(GroupSuspectSeqOfKey("job", "job/group/suspect/0000000004.json"), 4u);
  EXPECT_EQ(GroupSuspectSeqOfKey("job", "job/group/suspect/4.json"), std::nullopt);
  EXPECT_EQ(RecordNameOf("p/a.json", "p/"), "a");
  EXPECT_EQ(RecordNameOf("p/a/b.json", "p/"), "");
  EXPECT_EQ(RecordNameOf("p/a.txt", "p/"), "");
}

TEST(RepositoryTest, KeepsTheJobsRecordsUnderItsKeys) {
  MemoryStore store;
  const Repository repo = Repository::Open(store, "job");
  EXPECT_EQ(repo.Part(2).job(), "job/nodes/2");
  EXPECT_EQ(repo.Prefix(), "job/");

  // The complete marker: written once, never replaced.
  EXPECT_FALSE(*repo.IsComplete());
  EXPECT_FALSE(repo.ReadComplete()->has_value());
  ASSERT_TRUE(repo.MarkComplete("first").ok());
  EXPECT_TRUE(repo.MarkComplete("second").Is(StatusCode::kPreconditionFailed));
  EXPECT_TRUE(*repo.IsComplete());
  EXPECT_EQ(**repo.ReadComplete(), "first");
  EXPECT_TRUE(store.Head("job/complete").ok());

  // Events, listed in time order with their stamp and kind.
  ASSERT_TRUE(repo.PutEvent("20261122T082201.000Z", "stop", "{}").ok());
  ASSERT_TRUE(repo.PutEvent("20261122T082200.000Z", "notice", "{}").ok());
  ASSERT_TRUE(store.Put("job/events/stray", "x", PutCondition::None()).ok());
  auto events = repo.Events();
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0].stamp, "20261122T082200.000Z");
  EXPECT_EQ((*events)[0].kind, "notice");
  EXPECT_EQ((*events)[1].kind, "stop");
  EXPECT_EQ((*events)[2].stamp, "");  // not an event's name

  // Log segments, in reading order whatever their names' order.
  auto newer = repo.PutLogSegment(LogSegmentName{"i-b", 2, 1, "20261122T090000.000Z"}, "b");
  auto older = repo.PutLogSegment(LogSegmentName{"i-a", 1, 9, "20261122T100000.000Z"}, "a");
  ASSERT_TRUE(newer.ok() && older.ok());
  EXPECT_EQ(*older, "job/logs/i-a/0000000001-0000000009-20261122T100000.000Z.log.zst");
  auto segments = repo.LogSegments();
  ASSERT_TRUE(segments.ok());
  ASSERT_EQ(segments->size(), 2u);
  EXPECT_EQ((*segments)[0].name.generation, 1u);
  EXPECT_EQ((*segments)[1].name.instance, "i-b");

  // A suspect mark, cleared once.
  ASSERT_TRUE(repo.MarkSuspect(3, "{}").ok());
  EXPECT_TRUE(store.Head("job/snapshots/0000000003/suspect.json").ok());
  EXPECT_TRUE(repo.ClearSuspect(3).ok());
  EXPECT_TRUE(repo.ClearSuspect(3).Is(StatusCode::kNotFound));
}

// `run`'s start lists the job's history once: the fence is drawn after its
// newest seq and the restore chooses from the same listing (the start
// listed it twice before, once to draw the fence and once to restore).
TEST(RepositoryTest, RunsStartListsTheHistoryOnce) {
  TempDir dir;
  MemoryStore memory;
  FakeClock clock;
  clock.SetNow(std::chrono::system_clock::now());
  const Repository stored = Repository::Open(memory, "job");
  for (int step = 1; step <= 2; ++step) {
    const std::string src = dir.Join("src-" + std::to_string(step));
    WriteTree(src, {{"step-" + std::to_string(step) + ".bin", {RandomBytes(3000, step)}}});
    auto capture = CaptureTree(src, step);
    ASSERT_TRUE(capture.ok());
    SnapshotRequest request;
    request.instance = "i-old";
    ASSERT_TRUE(stored.Write(clock, SnapshotOptions{}, *capture, request).ok());
  }

  FaultyStore store(memory);
  const Config config = GenericCheckpointConfig(dir.Join("ckpt"), "step-*.bin");
  LeaseKeeper lease(store, clock, config.job, "i-new", LeaseOptions{});
  std::mutex lease_mu;
  EventLog events(store, clock, config.job, "i-new");
  const std::map<std::string, std::string> env;
  SystemdNotifier notifier(env);
  const std::string instance = "i-new";
  std::optional<uint64_t> fenced_after;
  StartSteps steps{
      config, store, clock, events, lease, lease_mu, notifier, instance, [&](uint64_t newest_seq) {
        fenced_after = newest_seq;
        return DrawFenceAfter(store, config.job, lease.generation(), newest_seq, instance,
                              FormatUtc(clock.Now(), true))
            .status();
      }};
  JobStart start = StartJob(steps);
  ASSERT_EQ(start.outcome, JobStart::Outcome::kStarted) << start.status.ToString();
  EXPECT_EQ(fenced_after, 2u);
  EXPECT_EQ(start.point.state.last_seq, 2u);
  EXPECT_EQ(ReadTree(config.checkpoint_dir).count("step-2.bin"), 1u);
  EXPECT_EQ(store.listings_of("job/snapshots/"), 1);
  EXPECT_EQ(store.listings_of("job/fences/"), 1);
}

}  // namespace
}  // namespace sg::testing
