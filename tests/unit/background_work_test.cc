// BackgroundCall and BackgroundQueue (common/background_*.h): work that may
// hang on the store runs off the caller's thread, and the caller can give up
// on it. The tests block the work on a latch they control, so no verdict
// depends on timing.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "common/background_call.h"
#include "common/background_queue.h"

namespace sg::testing {
namespace {

using std::chrono::milliseconds;

TEST(BackgroundCall, AStuckCallIsPolledWithoutWaitingAndItsResultTakenOnce) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  BackgroundCall<int> call;
  EXPECT_FALSE(call.busy());
  EXPECT_FALSE(call.Poll().has_value());
  call.Start([released] {
    released.wait();
    return 42;
  });
  EXPECT_TRUE(call.busy());
  EXPECT_FALSE(call.Poll().has_value());
  EXPECT_FALSE(call.WaitFor(milliseconds(1)).has_value());  // gives up
  release.set_value();
  const std::optional<int> got = call.WaitFor(milliseconds(60'000));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, 42);
  EXPECT_FALSE(call.busy());
  EXPECT_FALSE(call.Poll().has_value());
}

TEST(BackgroundCall, AStartOverAStuckCallLeavesItAndServesTheNewOne) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  BackgroundCall<std::string> call;
  call.Start([released] {
    released.wait();
    return std::string("old");
  });
  call.Start([] { return std::string("new"); });
  const auto got = call.WaitFor(milliseconds(60'000));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, "new");
  release.set_value();  // the old one ends on its own; nobody waits for it
}

TEST(BackgroundQueue, TasksRunInOrderAndDrainWaitsForAll) {
  BackgroundQueue queue;
  std::vector<int> ran;  // written by the queue's one thread only
  for (int i = 0; i < 5; ++i) queue.Post([&ran, i] { ran.push_back(i); });
  ASSERT_TRUE(queue.DrainFor(milliseconds(60'000)));
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(BackgroundQueue, ATaskThatHangsHoldsUpOnlyTheTasksBehindIt) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  BackgroundQueue queue;
  bool second_ran = false;
  queue.Post([&started, released] {
    started.set_value();
    released.wait();
  });
  queue.Post([&second_ran] { second_ran = true; });
  started.get_future().wait();
  // The caller is not held: the drain gives up, and says so.
  EXPECT_FALSE(queue.DrainFor(milliseconds(1)));
  release.set_value();
  ASSERT_TRUE(queue.DrainFor(milliseconds(60'000)));
  EXPECT_TRUE(second_ran);
}

TEST(BackgroundQueue, AnEmptyQueueIsDrainedAtOnce) {
  BackgroundQueue queue;
  EXPECT_TRUE(queue.DrainFor(milliseconds(0)));
}

}  // namespace
}  // namespace sg::testing
