// The event history: one object per event, never overwritten.
#include "agent/ledger/events.h"

#include <gtest/gtest.h>

#include "agent/run/interruption_history.h"
#include "common/file_store.h"
#include "tests/support/fake_clock.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

// A file:// store in `dir`.
void OpenStore(const TempDir& dir, std::unique_ptr<FileStore>& out) {
  auto opened = FileStore::Open(dir.path());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  out = std::move(*opened);
}

TEST(EventLog, TwoInstancesRecordingTheSameKindInTheSameMillisecondKeepBothEvents) {
  TempDir dir;
  std::unique_ptr<FileStore> opened;
  ASSERT_NO_FATAL_FAILURE(OpenStore(dir, opened));
  FileStore& store = *opened;
  FakeClock clock;  // both instances read the very same time
  EventLog a(store, clock, "job", "i-aaaa");
  EventLog b(store, clock, "job", "i-bbbb");
  ASSERT_TRUE(a.Record("notice").ok());
  ASSERT_TRUE(b.Record("notice").ok());
  auto recent = a.Recent(10);
  ASSERT_TRUE(recent.ok()) << recent.status().ToString();
  ASSERT_EQ(recent->size(), 2u);
  EXPECT_EQ((*recent)[0]["instance"], "i-bbbb") << "the later one moved to the next millisecond";
  EXPECT_EQ((*recent)[1]["instance"], "i-aaaa");
  EXPECT_NE((*recent)[0]["time"], (*recent)[1]["time"]);
}

TEST(EventLog, DetailsCannotOverwriteTheEventsOwnFields) {
  TempDir dir;
  std::unique_ptr<FileStore> opened;
  ASSERT_NO_FATAL_FAILURE(OpenStore(dir, opened));
  FileStore& store = *opened;
  FakeClock clock;
  EventLog log(store, clock, "job", "i-1");
  ASSERT_TRUE(log.Record("snapshot", {{"kind", "forged"}, {"seq", 7}}).ok());
  auto recent = log.Recent(1);
  ASSERT_TRUE(recent.ok());
  ASSERT_EQ(recent->size(), 1u);
  EXPECT_EQ((*recent)[0]["kind"], "snapshot");
  EXPECT_EQ((*recent)[0]["detail_kind"], "forged");
  EXPECT_EQ((*recent)[0]["seq"], 7);
}

TEST(EventLog, TheEnginesIndexAndAttemptGoIntoEveryEventOnlyWhenSet) {
  TempDir dir;
  std::unique_ptr<FileStore> opened;
  ASSERT_NO_FATAL_FAILURE(OpenStore(dir, opened));
  FileStore& store = *opened;
  FakeClock clock;
  EventLog log(store, clock, "job", "i-1");
  ASSERT_TRUE(log.Record("start").ok());
  log.SetEngineIdentity(7, 2);
  clock.Advance(std::chrono::milliseconds(5));
  ASSERT_TRUE(log.Record("stop", {{"attempt", "forged"}}).ok());
  auto recent = log.Recent(2);
  ASSERT_TRUE(recent.ok());
  ASSERT_EQ(recent->size(), 2u);
  EXPECT_EQ((*recent)[0]["index"], 7);
  EXPECT_EQ((*recent)[0]["attempt"], 2);
  EXPECT_EQ((*recent)[0]["detail_attempt"], "forged");
  EXPECT_FALSE((*recent)[1].contains("index")) << "outside an engine, no new keys";
  EXPECT_FALSE((*recent)[1].contains("attempt"));
}

// The cadence's history comes from the event keys: the time since the first
// event and the notices, whatever instance recorded them; a key that is not
// an event's is passed over.
TEST(InterruptionHistoryTest, ExposureAndNoticesComeFromTheEventKeys) {
  TempDir dir;
  std::unique_ptr<FileStore> opened;
  ASSERT_NO_FATAL_FAILURE(OpenStore(dir, opened));
  FileStore& store = *opened;
  FakeClock clock;
  clock.SetNow(Clock::WallTime(std::chrono::seconds(1'795'000'000)));
  const Clock::WallTime first = clock.Now();
  EventLog a(store, clock, "job", "i-1");
  EventLog b(store, clock, "job", "i-2");
  ASSERT_TRUE(a.Record("start").ok());
  clock.Advance(std::chrono::hours(3));
  ASSERT_TRUE(a.Record("notice").ok());
  clock.Advance(std::chrono::hours(1));
  ASSERT_TRUE(b.Record("start").ok());
  clock.Advance(std::chrono::hours(5));
  ASSERT_TRUE(b.Record("notice").ok());
  ASSERT_TRUE(b.Record("snapshot").ok());
  ASSERT_TRUE(store.Put("job/events/README", "not an event", PutCondition::None()).ok());
  ASSERT_TRUE(EventLog(store, clock, "other", "i-3").Record("notice").ok());

  auto h = ReadInterruptionHistory(store, "job", first + std::chrono::hours(10));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->interruptions, 2);
  EXPECT_DOUBLE_EQ(h->exposure.count(), 10 * 3600.0);

  auto none = ReadInterruptionHistory(store, "fresh", first);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->interruptions, 0);
  EXPECT_DOUBLE_EQ(none->exposure.count(), 0);
}

TEST(InterruptionHistoryTest, ACompactStampIsParsedExactlyAndAnythingElseIsNot) {
  auto t = ParseCompactStamp("20261122T082200.123Z");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(FormatUtc(*t, /*millis=*/true), "2026-11-22T08:22:00.123Z");
  EXPECT_FALSE(ParseCompactStamp("2026-11-22T08:22:00.123Z").has_value());
  EXPECT_FALSE(ParseCompactStamp("20261122T082200.123").has_value());
  EXPECT_FALSE(ParseCompactStamp("20261122X082200.123Z").has_value());
  EXPECT_FALSE(ParseCompactStamp("").has_value());
}


TEST(EventLog, EveryEventCarriesTheAttemptIdTheNodeAndTheTimeItHappened) {
  TempDir dir;
  std::unique_ptr<FileStore> opened;
  ASSERT_NO_FATAL_FAILURE(OpenStore(dir, opened));
  FileStore& store = *opened;
  FakeClock clock;
  EventLog log(store, clock, "job", "i-1");
  EXPECT_EQ(log.attempt_id().rfind("i-1-", 0), 0u) << log.attempt_id();
  const Clock::WallTime happened = clock.Now();
  clock.Advance(std::chrono::seconds(30));  // written later, off the notice path
  ASSERT_TRUE(log.Record("notice", {}, happened).ok());
  log.SetNode(2);
  ASSERT_TRUE(log.Record("stop").ok());
  auto recent = log.Recent(2);
  ASSERT_TRUE(recent.ok());
  ASSERT_EQ(recent->size(), 2u);
  EXPECT_EQ((*recent)[1]["kind"], "notice");
  EXPECT_EQ((*recent)[1]["time"], FormatUtc(happened, true));
  EXPECT_EQ((*recent)[1]["attempt_id"], log.attempt_id());
  EXPECT_FALSE((*recent)[1].contains("node"));
  EXPECT_EQ((*recent)[0]["node"], 2);
  EXPECT_EQ((*recent)[0]["attempt_id"], log.attempt_id());
  EventLog given(store, clock, "job", "i-1", "chosen-id");
  EXPECT_EQ(given.attempt_id(), "chosen-id");
}

}  // namespace
}  // namespace sg::testing
