#include "agent/repo/lease.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <thread>

#include "common/file_store.h"
#include "tests/support/fake_clock.h"
#include "tests/support/faulty_store.h"
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

// The lease's calls give up within a heartbeat (docs/s3.md, "Timeouts"), so
// a renewal can land on the server after its caller stopped waiting. The
// next renewal must see its own write, not a takeover.
TEST_F(LeaseTest, ARenewalWhoseAnswerWasLostIsNotTakenForATakeover) {
  FaultyStore faulty(*store_);
  LeaseKeeper a(faulty, clock_, "job", "i-a", LeaseOptions{seconds(30), seconds(150)});
  ASSERT_EQ(a.TryAcquire()->outcome, Outcome::kAcquired);
  faulty.LoseAnswerOfPutOf("job/lease");
  clock_.Advance(seconds(30));
  EXPECT_FALSE(a.Renew().ok()) << "the answer was lost";
  clock_.Advance(seconds(30));
  Status again = a.Renew();
  EXPECT_TRUE(again.ok()) << again.ToString();
  EXPECT_TRUE(a.held());
  EXPECT_EQ(a.generation(), 1u);
  // A real takeover is still a takeover.
  LeaseKeeper b = Keeper("i-b");
  clock_.Advance(seconds(151));
  ASSERT_EQ(b.TryAcquire()->outcome, Outcome::kHeldByOther);  // starts its watch
  clock_.Advance(seconds(151));
  ASSERT_EQ(b.TryAcquire()->outcome, Outcome::kAcquired);
  Status fenced = a.Renew();
  EXPECT_FALSE(fenced.ok());
  EXPECT_EQ(fenced.reason(), "Fenced");
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

// Agents as the lease names them; which of them still run is up to the test.
class SameInstanceTest : public LeaseTest {
 protected:
  LeaseKeeper Agent(const std::string& instance, int64_t pid) {
    LeaseOptions o{seconds(30), seconds(150)};
    o.agent = AgentIdentity{pid, 1000 + static_cast<uint64_t>(pid), "boot-1"};
    o.agent_alive = [this](const AgentIdentity& a) { return alive_.count(a.pid) > 0; };
    return LeaseKeeper(*store_, clock_, "job", instance, o);
  }
  std::set<int64_t> alive_;
};

TEST_F(SameInstanceTest, TheSameInstanceRestartedTakesItsLeaseBackOnceTheOldAgentIsGone) {
  LeaseKeeper a = Agent("i-a", 100);
  alive_.insert(100);
  ASSERT_EQ(a.TryAcquire()->outcome, Outcome::kAcquired);
  auto state = LeaseKeeper::Parse(*static_cast<ObjectStore&>(*store_).Get("job/lease"));
  ASSERT_TRUE(state.ok() && state->agent.has_value());
  EXPECT_EQ(state->agent->pid, 100) << "the lease names the agent process";
  EXPECT_EQ(state->agent->start_ticks, 1100u);
  alive_.erase(100);  // killed -9
  LeaseKeeper a_again = Agent("i-a", 200);
  auto r = a_again.TryAcquire();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, Outcome::kAcquired) << "taken back at once, no lease.timeout wait";
  EXPECT_EQ(a_again.generation(), 2u);
  EXPECT_FALSE(a.Renew().ok()) << "the crashed incarnation is fenced";
}

TEST_F(SameInstanceTest, ASecondLiveAgentOfTheSameInstanceWaitsLikeAnyOther) {
  LeaseKeeper a = Agent("i-a", 100);
  alive_ = {100, 200};
  ASSERT_EQ(a.TryAcquire()->outcome, Outcome::kAcquired);
  LeaseKeeper b = Agent("i-a", 200);
  for (int i = 0; i < 10; ++i) {
    auto r = b.TryAcquire();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->outcome, Outcome::kHeldByOther);
    ASSERT_TRUE(r->current.agent.has_value());
    EXPECT_EQ(r->current.agent->pid, 100);
    clock_.Advance(seconds(30));
    ASSERT_TRUE(a.Renew().ok()) << "the live agent keeps its lease";
  }
  // Once the first agent stops renewing it goes stale like any other lease.
  EXPECT_EQ(b.TryAcquire()->outcome, Outcome::kHeldByOther);
  clock_.Advance(seconds(151));
  EXPECT_EQ(b.TryAcquire()->outcome, Outcome::kAcquired);
}

TEST_F(SameInstanceTest, ALeaseWithoutAnAgentFieldFromTheSameInstanceWaitsForTheTimeout) {
  // Written by spotguard 0.1.0: nothing proves its writer gone.
  ASSERT_TRUE(
      static_cast<ObjectStore&>(*store_)
          .Put("job/lease",
               R"({"generation": 4, "instance": "i-a", "heartbeat": "", "released": false})",
               PutCondition::CreateOnly())
          .ok());
  LeaseKeeper b = Agent("i-a", 200);
  alive_.insert(200);
  auto r = b.TryAcquire();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, Outcome::kHeldByOther);
  EXPECT_FALSE(r->current.agent.has_value());
  clock_.Advance(seconds(151));
  r = b.TryAcquire();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, Outcome::kAcquired);
  EXPECT_EQ(b.generation(), 5u);
}

TEST(AgentProcessAlive, TellsThisProcessFromAGoneOne) {
  const AgentIdentity me = ThisAgent();
  EXPECT_EQ(me.pid, ::getpid());
  EXPECT_GT(me.start_ticks, 0u);
  EXPECT_TRUE(AgentProcessAlive(me));
  AgentIdentity reused = me;
  reused.start_ticks += 1;  // the same pid, a later incarnation
  EXPECT_FALSE(AgentProcessAlive(reused));
  AgentIdentity other_boot = me;
  other_boot.boot_id = "00000000-0000-0000-0000-000000000000";
  EXPECT_FALSE(AgentProcessAlive(other_boot));
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
