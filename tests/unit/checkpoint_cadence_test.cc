// The checkpoint cadence (agent/run/checkpoint_cadence.h) on the fake clock:
// Young's interval from the measured cost and the interruption rate, within
// the bounds, and shorter after a rebalance recommendation.
#include "agent/run/checkpoint_cadence.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/fake_clock.h"

namespace sg::testing {
namespace {

using std::chrono::seconds;

CadenceOptions Wide(Seconds mtbf) {
  CadenceOptions o;
  o.min = Seconds(1);
  o.max = Seconds(100'000);
  o.mtbf = mtbf;
  return o;
}

// One request answered `cost` later, on the fake clock.
void Measure(CheckpointCadence& cadence, FakeClock& clock, seconds cost) {
  const auto asked = clock.Monotonic();
  clock.Advance(cost);
  cadence.OnCommitted(asked, clock.Monotonic());
}

TEST(CheckpointCadenceTest, YoungsIntervalIsTheRootOfTwiceCostTimesMtbf) {
  EXPECT_DOUBLE_EQ(YoungInterval(Seconds(60), Seconds(3600)).count(), std::sqrt(2.0 * 60 * 3600));
  EXPECT_DOUBLE_EQ(YoungInterval(Seconds(0), Seconds(3600)).count(), 0);
}

TEST(CheckpointCadenceTest, TheCadenceFollowsYoungsIntervalForThreeCostsAndTwoRates) {
  for (const double mtbf_hours : {2.0, 12.0}) {
    for (const int cost : {10, 60, 300}) {
      FakeClock clock;
      CheckpointCadence cadence(Wide(Seconds(mtbf_hours * 3600)));
      Measure(cadence, clock, seconds(cost));
      const CadenceInputs in = cadence.At(clock.Monotonic());
      EXPECT_DOUBLE_EQ(in.cost.count(), cost);
      EXPECT_DOUBLE_EQ(in.mtbf.count(), mtbf_hours * 3600);
      EXPECT_NEAR(in.interval.count(), std::sqrt(2.0 * cost * mtbf_hours * 3600), 1e-6)
          << "C " << cost << " s, MTBF " << mtbf_hours << " h";
    }
  }
}

TEST(CheckpointCadenceTest, TheCostIsAMovingEstimate) {
  FakeClock clock;
  CheckpointCadence cadence(Wide(Seconds(3600)));
  Measure(cadence, clock, seconds(100));
  Measure(cadence, clock, seconds(200));  // 0.3 x 200 + 0.7 x 100
  EXPECT_DOUBLE_EQ(cadence.cost().count(), 130);
}

TEST(CheckpointCadenceTest, TheIntervalStaysWithinMinAndMax) {
  FakeClock clock;
  CadenceOptions o = Wide(Seconds(3600));
  o.min = Seconds(600);
  o.max = Seconds(1200);
  CheckpointCadence cadence(o);
  Measure(cadence, clock, seconds(1));  // Young: 85 s
  EXPECT_DOUBLE_EQ(cadence.At(clock.Monotonic()).interval.count(), 600);
  for (int i = 0; i < 20; ++i) Measure(cadence, clock, seconds(3000));  // Young: ~4600 s
  EXPECT_DOUBLE_EQ(cadence.At(clock.Monotonic()).interval.count(), 1200);
}

TEST(CheckpointCadenceTest, ARebalanceRecommendationShortensTheIntervalUntilTheRiskDecays) {
  FakeClock clock;
  CheckpointCadence cadence(Wide(Seconds(6 * 3600)));
  Measure(cadence, clock, seconds(60));
  const double before = cadence.At(clock.Monotonic()).interval.count();
  EXPECT_NEAR(before, std::sqrt(2.0 * 60 * 6 * 3600), 1e-6);
  cadence.OnRebalance(clock.Monotonic());
  const CadenceInputs at_once = cadence.At(clock.Monotonic());
  // Ten times the rate: the interval shrinks by sqrt(10).
  EXPECT_DOUBLE_EQ(at_once.rate_factor, 10);
  EXPECT_NEAR(at_once.interval.count(), before / std::sqrt(10.0), 1e-6);
  clock.Advance(seconds(1800));  // one half-life: 1 + 9/2
  EXPECT_DOUBLE_EQ(cadence.At(clock.Monotonic()).rate_factor, 5.5);
  clock.Advance(std::chrono::hours(24));
  EXPECT_NEAR(cadence.At(clock.Monotonic()).interval.count(), before, 0.01 * before);
}

TEST(CheckpointCadenceTest, OnlyAChangeBeyondTheThresholdIsAnnounced) {
  FakeClock clock;
  CheckpointCadence cadence(Wide(Seconds(3600)));
  ASSERT_TRUE(cadence.Changed(clock.Monotonic()));  // the first is always announced
  Measure(cadence, clock, seconds(62));  // 60 -> 62: ~1.6 % longer
  EXPECT_FALSE(cadence.Changed(clock.Monotonic()));
  cadence.OnRebalance(clock.Monotonic());
  auto changed = cadence.Changed(clock.Monotonic());
  ASSERT_TRUE(changed);
  EXPECT_DOUBLE_EQ(changed->rate_factor, 10);
  EXPECT_NE(DescribeCadence(*changed, "rebalance recommendation").find("rebalance"),
            std::string::npos);
}

// The MTBF learned from the job's history: the prior counts as one
// interval, so no history keeps it, and a long one outweighs it.
TEST(CheckpointCadenceTest, TheMtbfIsLearnedFromTheJobsHistory) {
  const Seconds prior(6 * 3600.0);
  EXPECT_DOUBLE_EQ(LearnedMtbf(prior, {}).count(), prior.count());
  // 2 notices in 18 h: (6 + 18) / 3 = 8 h.
  EXPECT_DOUBLE_EQ(LearnedMtbf(prior, {Seconds(18 * 3600.0), 2}).count(), 8 * 3600.0);
  // 10 h without a notice: (6 + 10) / 1 = 16 h, longer than the prior.
  EXPECT_DOUBLE_EQ(LearnedMtbf(prior, {Seconds(10 * 3600.0), 0}).count(), 16 * 3600.0);
  // 99 notices in 99 h: (6 + 99) / 100 = 1.05 h, near the observed 1 h.
  EXPECT_NEAR(LearnedMtbf(prior, {Seconds(99 * 3600.0), 99}).count(), 1.05 * 3600, 1e-6);

  // The cadence uses it: with C = 60 s, sqrt(2 x 60 x 8 h) = 1859 s.
  FakeClock clock;
  CheckpointCadence cadence(Wide(prior));
  Measure(cadence, clock, seconds(60));
  cadence.Learn({Seconds(18 * 3600.0), 2});
  EXPECT_DOUBLE_EQ(cadence.At(clock.Monotonic()).mtbf.count(), 8 * 3600.0);
  EXPECT_NEAR(cadence.At(clock.Monotonic()).interval.count(), std::sqrt(2.0 * 60 * 8 * 3600), 1e-6);
}

// The schedule both executors ask with: the first request one interval
// after the start, a request whose answer measures C, an unanswered request
// that keeps its time, and a shorter interval that takes effect at once.
TEST(CadenceScheduleTest, RequestsComeAtTheIntervalAndTheirAnswersMeasureTheCost) {
  FakeClock clock;
  CadenceOptions o = Wide(Seconds(50));
  o.initial_cost = Seconds(1);  // sqrt(2 x 1 x 50) = 10 s
  CadenceSchedule schedule(o);
  EXPECT_FALSE(schedule.started());
  EXPECT_FALSE(schedule.Due(clock.Monotonic())) << "nothing is due before the first interval";
  const auto first = schedule.Changed(clock.Monotonic());
  ASSERT_TRUE(first.has_value());
  EXPECT_DOUBLE_EQ(first->interval.count(), 10);
  EXPECT_TRUE(schedule.started());
  clock.Advance(seconds(9));
  EXPECT_FALSE(schedule.Due(clock.Monotonic()));
  clock.Advance(seconds(1));
  EXPECT_TRUE(schedule.Due(clock.Monotonic()));
  EXPECT_FALSE(schedule.Due(clock.Monotonic())) << "the next is one interval on";
  schedule.Asked(clock.Monotonic(), clock.Now());
  const auto asked_wall = schedule.asked_wall();
  clock.Advance(seconds(4));
  schedule.Asked(clock.Monotonic(), clock.Now());  // unanswered: keeps its time
  EXPECT_EQ(schedule.asked_wall(), asked_wall);
  clock.Advance(seconds(4));
  schedule.Answered(clock.Monotonic());  // 8 s after the first request
  EXPECT_FALSE(schedule.asking());
  EXPECT_DOUBLE_EQ(schedule.cadence().cost().count(), 8);
  // sqrt(2 x 8 x 50) = 28.3 s: longer, so the request already due stays.
  const auto longer = schedule.Changed(clock.Monotonic());
  ASSERT_TRUE(longer.has_value());
  EXPECT_NEAR(longer->interval.count(), std::sqrt(800.0), 1e-9);
  clock.Advance(seconds(2));
  EXPECT_TRUE(schedule.Due(clock.Monotonic())) << "10 s after the last request";
  // A rebalance recommendation (rate x 10) makes it shorter, at once.
  schedule.Rebalance(clock.Monotonic());
  const auto shorter = schedule.Changed(clock.Monotonic());
  ASSERT_TRUE(shorter.has_value());
  EXPECT_NEAR(shorter->interval.count(), std::sqrt(80.0), 1e-9);
  clock.Advance(seconds(9));
  EXPECT_TRUE(schedule.Due(clock.Monotonic())) << "8.9 s, not 28.3 s, after the request";
  schedule.Answered(clock.Monotonic());  // nothing asked: no measurement
  EXPECT_DOUBLE_EQ(schedule.cadence().cost().count(), 8);
}

}  // namespace
}  // namespace sg::testing
