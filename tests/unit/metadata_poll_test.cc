// MetadataPoll (agent/run/metadata_poll.h): the loop's reads of the metadata
// service run on a thread of their own. A service held by the test shows that
// the loop's turn returns without it, that one poll runs at a time, and that
// its events arrive once, on the turn after it ends. Nothing is timed: the
// service answers when the test opens it (or after 60 s, which fails).
#include "agent/run/metadata_poll.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "tests/support/fake_clock.h"
#include "tests/support/wait_until.h"

namespace sg {
namespace {

using std::chrono::seconds;

// A spot notice on every Get, each Get held until the test opens the gate.
class GatedMetadata final : public MetadataService {
 public:
  StatusOr<std::string> Get(std::string_view path) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++gets_;
    if (!cv_.wait_for(lock, seconds(60), [&] { return open_; })) timed_out_ = true;
    if (path == InterruptionMonitor::kNoticePath) {
      return std::string(R"({"action":"terminate","time":"2030-01-01T00:00:00Z"})");
    }
    return Status::NotFound(std::string(path));
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  int gets() {
    std::lock_guard<std::mutex> lock(mu_);
    return gets_;
  }
  bool timed_out() {
    std::lock_guard<std::mutex> lock(mu_);
    return timed_out_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int gets_ = 0;
  bool timed_out_ = false;
};

TEST(MetadataPoll, AServiceThatDoesNotAnswerHoldsItsThreadNotTheLoop) {
  testing::FakeClock clock;
  GatedMetadata imds;
  InterruptionMonitor monitor(imds, clock, {});
  MetadataPoll poll(&monitor, seconds(2), /*run_inline=*/false);
  const Clock::MonoTime t0 = clock.Monotonic();

  // The first turn starts a poll, which the service holds: the turn returns
  // with nothing.
  EXPECT_TRUE(poll.Take(t0).empty());
  EXPECT_TRUE(poll.running());
  ASSERT_TRUE(testing::WaitUntil([&] { return imds.gets() == 1; }, seconds(60)));
  // Turns past the interval start no second poll while the first runs.
  EXPECT_TRUE(poll.Take(t0 + seconds(5)).empty());
  EXPECT_TRUE(poll.Take(t0 + seconds(9)).empty());
  EXPECT_EQ(imds.gets(), 1);
  EXPECT_FALSE(poll.Finish(std::chrono::milliseconds(0)));

  imds.Open();
  std::vector<InterruptionEvent> events;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        events = poll.Take(t0 + seconds(10));
        return !events.empty();
      },
      seconds(60)));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].IsNotice());
  EXPECT_FALSE(imds.timed_out()) << "a turn waited for the service";
  // The turn that took the events started the next poll (10 s > 2 s; it
  // may have ended within that turn already): two polls of the four
  // sources in all, and the notice is not reported again.
  ASSERT_TRUE(poll.Finish(seconds(60)));
  EXPECT_EQ(imds.gets(), 8);
  EXPECT_TRUE(poll.Take(t0 + seconds(11)).empty());
  EXPECT_EQ(imds.gets(), 8) << "polled again within the interval";
}

TEST(MetadataPoll, RunInlineAPollsEventsAreThatTurnsAndTheIntervalIsKept) {
  testing::FakeClock clock;
  GatedMetadata imds;
  imds.Open();
  InterruptionMonitor monitor(imds, clock, {});
  MetadataPoll poll(&monitor, seconds(2), /*run_inline=*/true);
  const Clock::MonoTime t0 = clock.Monotonic();
  EXPECT_EQ(poll.Take(t0).size(), 1u);
  const int after_first = imds.gets();
  EXPECT_TRUE(poll.Take(t0 + seconds(1)).empty());
  EXPECT_EQ(imds.gets(), after_first) << "polled again within the interval";
  EXPECT_TRUE(poll.Take(t0 + seconds(2)).empty());  // read again; reported once
  EXPECT_GT(imds.gets(), after_first);
}

TEST(MetadataPoll, WithoutAMonitorNothingIsRead) {
  MetadataPoll poll(nullptr, seconds(2), /*run_inline=*/false);
  EXPECT_TRUE(poll.Take(Clock::MonoTime{}).empty());
  EXPECT_FALSE(poll.running());
  EXPECT_TRUE(poll.Finish(std::chrono::milliseconds(0)));
}

}  // namespace
}  // namespace sg
