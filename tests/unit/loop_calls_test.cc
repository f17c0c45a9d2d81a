// LoopCalls (common/loop_calls.h): store calls made off an event loop, in
// the order posted, their results handed back on the loop. The tests run
// the calls with a runner they hold, or block the call thread on a latch
// they control, so no verdict depends on timing.
#include "common/loop_calls.h"

#include <gtest/gtest.h>

#include <deque>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/background_call.h"

namespace sg::testing {
namespace {

// Holds the tasks until the test runs them.
struct HeldRunner {
  std::deque<std::function<void()>> tasks;
  LoopCalls::Runner runner() {
    return [this](std::function<void()> task) { tasks.push_back(std::move(task)); };
  }
  void RunAll() {
    while (!tasks.empty()) {
      auto task = std::move(tasks.front());
      tasks.pop_front();
      task();
    }
  }
};

TEST(LoopCalls, AResultWaitsForDeliverAndComesBackInTheOrderPosted) {
  HeldRunner held;
  LoopCalls calls(held.runner());
  std::vector<std::string> log;
  calls.Post<int>([&] { log.push_back("call 1"); return 1; },
                  [&](int& r) { log.push_back("then " + std::to_string(r)); });
  calls.Post<int>([&] { log.push_back("call 2"); return 2; },
                  [&](int& r) { log.push_back("then " + std::to_string(r)); });
  EXPECT_EQ(calls.pending(), 2u);
  calls.Deliver();  // nothing ran yet: nothing to hand back
  EXPECT_TRUE(log.empty());
  held.RunAll();
  EXPECT_EQ(log, (std::vector<std::string>{"call 1", "call 2"}));
  EXPECT_EQ(calls.pending(), 2u) << "returned, not yet delivered";
  calls.Deliver();
  EXPECT_EQ(log, (std::vector<std::string>{"call 1", "call 2", "then 1", "then 2"}));
  EXPECT_EQ(calls.pending(), 0u);
}

TEST(LoopCalls, ACallPostedByAResultRunsAfterTheCallsAlreadyQueued) {
  HeldRunner held;
  LoopCalls calls(held.runner());
  std::vector<int> ran;
  calls.Post([&] { ran.push_back(1); }, [&] { calls.Post([&] { ran.push_back(3); }); });
  calls.Post([&] { ran.push_back(2); });
  held.RunAll();
  calls.Deliver();
  held.RunAll();
  calls.Deliver();
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(calls.pending(), 0u);
}

TEST(LoopCalls, ACallThatHangsHoldsTheCallsBehindItNotTheLoop) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  LoopCalls calls;  // a thread of its own
  int delivered = 0;
  calls.Post([released] { released.wait(); }, [&] { ++delivered; });
  calls.Post([] {}, [&] { ++delivered; });
  calls.Deliver();  // returns at once: the first call still hangs
  EXPECT_EQ(delivered, 0);
  EXPECT_EQ(calls.pending(), 2u);
  release.set_value();
  for (int i = 0; i < 600'000 && calls.pending() > 0; ++i) {
    calls.Deliver();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  EXPECT_EQ(delivered, 2);
}

TEST(BackgroundCall, WithARunnerTheCallRunsWhenTheRunnerSays) {
  HeldRunner held;
  BackgroundCall<int> call(BackgroundCall<int>::Runner(held.runner()));
  call.Start([] { return 7; });
  EXPECT_TRUE(call.busy());
  EXPECT_FALSE(call.Poll().has_value());
  held.RunAll();
  const std::optional<int> got = call.Poll();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, 7);
  EXPECT_FALSE(call.busy());
}

}  // namespace
}  // namespace sg::testing
