// The start's watch and its retries (agent/run/start_watch.h) on a fake clock: a
// notice or a stop signal is seen and cancels; transient store failures are
// retried with growing waits for a bounded time, other failures are not.
#include "agent/run/start_watch.h"

#include <gtest/gtest.h>

#include "tests/support/agent_fakes.h"
#include "tests/support/fake_clock.h"

namespace sg::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(StartWatchTest, ANoticeCancelsTheStartAndIsKept) {
  FakeClock clock;
  FakeMetadata imds(clock);
  InterruptionMonitor monitor(imds, clock, InterruptionMonitor::Options{});
  StartWatch watch(clock, [] { return false; }, &monitor, milliseconds(2000));
  EXPECT_FALSE(watch.Check());
  imds.PostNotice(seconds(100));
  EXPECT_FALSE(watch.Check()) << "read once per poll interval";
  clock.Advance(seconds(2));
  EXPECT_TRUE(watch.Check());
  EXPECT_TRUE(watch.cancel().load());
  ASSERT_TRUE(watch.notice().has_value());
  EXPECT_TRUE(watch.notice()->IsNotice());
  EXPECT_TRUE(watch.Check()) << "and from then on";
}

TEST(StartWatchTest, AStopSignalCancelsTheStart) {
  FakeClock clock;
  bool signalled = false;
  StartWatch watch(clock, [&] { return std::exchange(signalled, false); }, nullptr,
                   milliseconds(2000));
  EXPECT_FALSE(watch.Check());
  signalled = true;
  EXPECT_TRUE(watch.Check());
  EXPECT_FALSE(watch.notice().has_value());
  EXPECT_TRUE(watch.stopped());
}

TEST(RetryTransientTest, AStoreThatComesBackIsWaitedForWithGrowingWaits) {
  RecordingClock clock;
  int tries = 0;
  const auto start = clock.Monotonic();
  Status st = RetryTransient(
      clock, "reading",
      [&] { return ++tries < 4 ? Status::Unavailable("connection refused") : Status::Ok(); },
      [] { return false; }, start + kStartRetryBound);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(tries, 4);
  EXPECT_EQ(clock.Monotonic() - start, seconds(1 + 2 + 4));
}

TEST(RetryTransientTest, GivesUpAfterTheBoundWithTheStoresError) {
  FakeClock clock;
  int tries = 0;
  const auto start = clock.Monotonic();
  Status st = RetryTransient(
      clock, "reading", [&] { return ++tries, Status::Unavailable("connection refused"); },
      [] { return false; }, start + kStartRetryBound);
  EXPECT_TRUE(st.Is(StatusCode::kUnavailable)) << st.ToString();
  EXPECT_LE(clock.Monotonic() - start, kStartRetryBound);
  EXPECT_GE(clock.Monotonic() - start, kStartRetryBound - seconds(30));
  EXPECT_GT(tries, 5);
}

TEST(RetryTransientTest, WhatARetryCannotFixIsNotRetried) {
  FakeClock clock;
  int tries = 0;
  Status st = RetryTransient(
      clock, "reading", [&] { return ++tries, Status::PermissionDenied("403 AccessDenied"); },
      [] { return false; }, clock.Monotonic() + kStartRetryBound);
  EXPECT_TRUE(st.Is(StatusCode::kPermissionDenied));
  EXPECT_EQ(tries, 1);
}

TEST(RetryTransientTest, AStopEndsTheWait) {
  FakeClock clock;
  const auto start = clock.Monotonic();
  Status st = RetryTransient(
      clock, "reading", [] { return Status::Unavailable("refused"); },
      [&] { return clock.Monotonic() - start >= milliseconds(500); }, start + kStartRetryBound);
  EXPECT_TRUE(st.Is(StatusCode::kCancelled)) << st.ToString();
  EXPECT_LT(clock.Monotonic() - start, seconds(1));
}

}  // namespace
}  // namespace sg::testing
