#include "agent/lease.h"

#include <gtest/gtest.h>

#include <thread>

#include "common/file_store.h"
#include "tests/support/fake_clock.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

using Outcome = LeaseKeeper::Outcome;
using std::chrono::seconds;

class LeaseTest : public ::testing::Test {
 protected:
  void SetUp() override { store_ = std::move(FileStore::Open(dir_.Join("store")).value()); }
  LeaseKeeper Keeper(const std::string& instance) {
    return LeaseKeeper(*store_, clock_, "job", instance, LeaseOptions{seconds(30), seconds(150)});
  }
  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<FileStore> store_;
};

TEST_F(LeaseTest, TheFirstAgentTakesGenerationOne) {
  LeaseKeeper a = Keeper("i-a");
  auto r = a.TryAcquire();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outcome, Outcome::kAcquired);
  EXPECT_EQ(a.generation(), 1u);
  auto body = static_cast<ObjectStore&>(*store_).Get("job/lease");
  auto state = LeaseKeeper::Parse(*body);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->instance, "i-a");
  EXPECT_FALSE(state->released);
}

TEST_F(LeaseTest, ASecondAgentWaitsWhileTheLeaseIsRenewed) {
  LeaseKeeper a = Keeper("i-a");
  LeaseKeeper b = Keeper("i-b");
  ASSERT_EQ(a.TryAcquire()->outcome, Outcome::kAcquired);
  for (int i = 0; i < 20; ++i) {  // ten minutes of heartbeats
    auto r = b.TryAcquire();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->outcome, Outcome::kHeldByOther);
    EXPECT_EQ(r->current.instance, "i-a");
    clock_.Advance(seconds(30));
    ASSERT_TRUE(a.RenewalDue());
    ASSERT_TRUE(a.Renew().ok());
  }
  EXPECT_FALSE(b.held());
}

TEST_F(LeaseTest, AStaleLeaseIsTakenOverAndTheOldHolderIsFenced) {
  LeaseKeeper a = Keeper("i-a");
  LeaseKeeper b = Keeper("i-b");
  ASSERT_EQ(a.TryAcquire()->outcome, Outcome::kAcquired);
  EXPECT_EQ(b.TryAcquire()->outcome, Outcome::kHeldByOther);
  clock_.Advance(seconds(149));
  EXPECT_EQ(b.TryAcquire()->outcome, Outcome::kHeldByOther) << "not stale yet";
  clock_.Advance(seconds(2));
  auto r = b.TryAcquire();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, Outcome::kAcquired);
  EXPECT_EQ(b.generation(), 2u);
  Status renew = a.Renew();
  EXPECT_TRUE(renew.Is(StatusCode::kPreconditionFailed)) << renew.ToString();
  EXPECT_EQ(renew.reason(), "Fenced");
  EXPECT_FALSE(a.held());
}

TEST_F(LeaseTest, AReleasedLeaseIsTakenAtOnce) {
  LeaseKeeper a = Keeper("i-a");
  LeaseKeeper b = Keeper("i-b");
  ASSERT_EQ(a.TryAcquire()->outcome, Outcome::kAcquired);
  ASSERT_TRUE(a.Release().ok());
  auto r = b.TryAcquire();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, Outcome::kAcquired);
  EXPECT_EQ(b.generation(), 2u);
}

TEST_F(LeaseTest, TheSameInstanceRestartedTakesItsLeaseBack) {
  LeaseKeeper a = Keeper("i-a");
  ASSERT_EQ(a.TryAcquire()->outcome, Outcome::kAcquired);
  LeaseKeeper a_again = Keeper("i-a");
  auto r = a_again.TryAcquire();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, Outcome::kAcquired);
  EXPECT_EQ(a_again.generation(), 2u);
  EXPECT_FALSE(a.Renew().ok()) << "the crashed incarnation is fenced";
}

TEST_F(LeaseTest, RacingTakersOfAStaleLeaseHaveOneWinner) {
  LeaseKeeper a = Keeper("i-a");
  ASSERT_EQ(a.TryAcquire()->outcome, Outcome::kAcquired);
  std::vector<LeaseKeeper> takers;
  for (int i = 0; i < 6; ++i) takers.push_back(Keeper("i-" + std::to_string(i)));
  for (auto& t : takers) ASSERT_EQ(t.TryAcquire()->outcome, Outcome::kHeldByOther);
  clock_.Advance(seconds(151));
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (auto& t : takers) {
    threads.emplace_back([&] {
      auto r = t.TryAcquire();
      if (r.ok() && r->outcome == Outcome::kAcquired) ++winners;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(winners.load(), 1);
}

}  // namespace
}  // namespace sg::testing
