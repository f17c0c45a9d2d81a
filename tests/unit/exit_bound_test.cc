// The one bound on an exit (agent/run/exit_bound.h; docs/design.md §9): one
// node's exit and a member's share it, and it never reaches past a second
// before a notice's deadline.
#include "agent/run/exit_bound.h"

#include <gtest/gtest.h>

#include "tests/support/fake_clock.h"

namespace sg::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ExitBound, IsKExitBoundWithoutADeadlineAndEachWaitTakesWhatIsLeft) {
  FakeClock clock;
  const ExitBound bound(clock, std::nullopt);
  EXPECT_EQ(bound.left(), kExitBound);
  clock.Advance(seconds(4));  // a wait for the upload
  EXPECT_EQ(bound.left(), kExitBound - seconds(4));
  clock.Advance(seconds(60));
  EXPECT_EQ(bound.left(), milliseconds(0));  // never negative
}

TEST(ExitBound, EndsASecondBeforeANoticesDeadline) {
  FakeClock clock;
  const ExitBound near(clock, clock.Monotonic() + seconds(6));
  EXPECT_EQ(near.left(), seconds(5));
  EXPECT_EQ(near.until(), clock.Monotonic() + seconds(5));
  const ExitBound far(clock, clock.Monotonic() + seconds(100));
  EXPECT_EQ(far.left(), kExitBound);
  const ExitBound past(clock, clock.Monotonic() - seconds(1));
  EXPECT_EQ(past.left(), milliseconds(0));
}

}  // namespace
}  // namespace sg::testing
