// A group node's checkpoint cadence (checkpoint_cadence auto) on the fake
// multi-node world (tests/support/fake_group_world.h): each node asks its own
// trainer at Young's interval, measures the cost of its answers, and counts a
// warning on any member as a higher interruption rate. The intervals are
// read from the `cadence` events each node records (docs/multi-node.md,
// "Checkpoint cadence").
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>

#include "agent/config/exit_codes.h"
#include "agent/ledger/ledger.h"
#include "tests/support/group_world_checks.h"

namespace sg::testing {
namespace {

using namespace std::chrono_literals;

// The `cadence` events `instance` recorded, oldest first.
std::vector<nlohmann::json> CadenceEvents(FakeGroupWorld& w, const std::string& instance) {
  auto events = ReadJobEvents(w.store, "job");
  EXPECT_TRUE(events.ok()) << events.status().ToString();
  std::vector<nlohmann::json> out;
  if (!events.ok()) return out;
  for (const nlohmann::json& e : *events) {
    if (e.value("kind", "") == "cadence" && e.value("instance", "") == instance) out.push_back(e);
  }
  return out;
}

const nlohmann::json* WithWhy(const std::vector<nlohmann::json>& events, const std::string& why) {
  auto it = std::find_if(events.begin(), events.end(),
                         [&](const nlohmann::json& e) { return e.value("why", "") == why; });
  return it == events.end() ? nullptr : &*it;
}

const std::map<std::string, std::string> kAuto = {{"checkpoint_cadence.mode", "auto"},
                                                  {"checkpoint_cadence.min", "2s"},
                                                  {"checkpoint_cadence.max", "2h"}};

TEST(GroupWorldCadence, EveryNodeAsksItsTrainerAtYoungsIntervalAndMeasuresTheCost) {
  auto flags = kAuto;
  flags["checkpoint_cadence.mtbf"] = "1s";  // sqrt(2 x 60 s x 1 s) = 11 s before a measurement
  flags["upload_interval"] = "1h";
  FakeGroupWorld w(2, flags);
  w.trainer.steps = 200;  // 40 s
  w.trainer.save_every = 0;  // checkpoints only when asked
  w.StartAll();
  ASSERT_TRUE(w.RunUntilExited(300s));
  for (int s = 0; s < 2; ++s) {
    const WorldNode& n = w.node(s);
    EXPECT_EQ(n.result.exit_code, kExitOk) << s;
    // The first request 11 s in, then one every 2 s (min) once C is measured.
    EXPECT_GE(std::count(n.signals.begin(), n.signals.end(), SIGUSR1), 8) << s;
    const auto events = CadenceEvents(w, n.instance);
    const nlohmann::json* start = WithWhy(events, "start");
    ASSERT_NE(start, nullptr) << s;
    EXPECT_NEAR(start->value("interval_seconds", 0.0), std::sqrt(2.0 * 60 * 1), 0.5) << *start;
    EXPECT_DOUBLE_EQ(start->value("cost_seconds", 0.0), 60) << "C before a measurement";
    const nlohmann::json* measured = WithWhy(events, "C or the interruption rate changed");
    ASSERT_NE(measured, nullptr) << s;
    EXPECT_LT(measured->value("cost_seconds", 60.0), 60) << *measured;
    EXPECT_DOUBLE_EQ(measured->value("interval_seconds", 0.0), 2) << "clamped to min";
  }
  // The answers became group snapshots.
  ASSERT_FALSE(w.GroupSeqs().empty());
  EXPECT_GE(w.GroupSeqs().back(), 5u);
}

// One member's rebalance recommendation shortens every node's interval: the
// others read its flush record (spot interruptions of one group come
// together).
TEST(GroupWorldCadence, ARebalanceOnOneMemberShortensEveryNodesInterval) {
  auto flags = kAuto;
  flags["checkpoint_cadence.mtbf"] = "1h";  // sqrt(2 x 60 s x 1 h) = 657 s
  flags["on_rebalance"] = "snapshot";
  FakeGroupWorld w(2, flags);
  w.trainer.steps = 100;
  w.trainer.save_every = 0;
  w.StartAll();
  w.At(5s, [&] { w.node(1).imds->PostRebalance(); });
  ASSERT_TRUE(w.RunUntilExited(300s));
  const auto own = CadenceEvents(w, w.node(1).instance);
  const nlohmann::json* rebalance = WithWhy(own, "rebalance recommendation");
  ASSERT_NE(rebalance, nullptr);
  // MTBF / 10: sqrt(2 x 60 s x 360 s) = 208 s.
  EXPECT_NEAR(rebalance->value("interval_seconds", 0.0), std::sqrt(2.0 * 60 * 360), 1) << *rebalance;
  const auto other = CadenceEvents(w, w.node(0).instance);
  const auto it = std::find_if(other.begin(), other.end(), [](const nlohmann::json& e) {
    return e.value("why", "").ends_with("'s rebalance recommendation");
  });
  ASSERT_NE(it, other.end()) << "node 0 counted the other member's warning";
  EXPECT_NEAR(it->value("rate_factor", 0.0), 10, 0.1) << *it;
  EXPECT_NEAR(it->value("interval_seconds", 0.0), std::sqrt(2.0 * 60 * 360), 1) << *it;
}

// Another member's notice ends the round; the survivor counts it too, and the
// higher rate outlives the round.
TEST(GroupWorldCadence, AnotherMembersNoticeRaisesTheSurvivorsRate) {
  auto flags = kAuto;
  flags["checkpoint_cadence.mtbf"] = "1h";
  FakeGroupWorld w(2, flags);
  w.trainer.steps = 100;
  w.trainer.save_every = 0;
  w.StartAll();
  w.At(5s, [&] { w.node(1).imds->PostNotice(120s); });
  ASSERT_TRUE(w.RunUntilExited(120s, {1}));
  EXPECT_EQ(w.node(1).result.exit_code, kExitInterrupted);
  const std::string noticed = w.node(1).instance;
  w.Start(1);  // the replacement
  ASSERT_TRUE(w.RunUntilExited(300s));
  EXPECT_EQ(w.node(0).result.exit_code, kExitOk);
  const auto survivor = CadenceEvents(w, w.node(0).instance);
  const nlohmann::json* warned = WithWhy(survivor, noticed + "'s interruption notice");
  ASSERT_NE(warned, nullptr) << "the survivor counted " << noticed << "'s notice";
  EXPECT_NEAR(warned->value("rate_factor", 0.0), 10, 0.1) << *warned;
  EXPECT_TRUE(WithWhy(CadenceEvents(w, noticed), noticed + "'s interruption notice") == nullptr)
      << "the noticed node's own notice is not another member's";
}

}  // namespace
}  // namespace sg::testing
