// The notice budget (agent/run/notice_budget.h): how long to wait for a fresh
// checkpoint, given the deadline and the measured upload rate.
#include "agent/run/notice_budget.h"

#include <gtest/gtest.h>

namespace sg::testing {
namespace {

using std::chrono::milliseconds;

TEST(NoticeBudget, WaitsWhatTheDeadlineLeavesAfterTheUploadAndTheMargin) {
  // 1 GiB at 100 MiB/s: 10.24 s to upload; 120 s - 10.24 s - 15 s margin.
  const NoticeBudget b = ComputeNoticeBudget(milliseconds(120'000), 1ull << 30, 100.0 * (1 << 20));
  EXPECT_EQ(b.upload_estimate, milliseconds(10'240));
  EXPECT_EQ(b.wait, milliseconds(120'000 - 10'240 - 15'000));
}

TEST(NoticeBudget, AnUploadThatEatsTheDeadlineLeavesNoWait) {
  // 100 GiB at 50 MiB/s take 2048 s: commit the newest complete checkpoint at once.
  const NoticeBudget b = ComputeNoticeBudget(milliseconds(120'000), 100ull << 30, 50.0 * (1 << 20));
  EXPECT_EQ(b.wait, milliseconds(0));
  EXPECT_EQ(b.upload_estimate, milliseconds(2'048'000));
}

TEST(NoticeBudget, APassedDeadlineLeavesNoWait) {
  EXPECT_EQ(ComputeNoticeBudget(milliseconds(-5'000), 0, 1e6).wait, milliseconds(0));
  EXPECT_EQ(ComputeNoticeBudget(milliseconds(14'000), 0, 1e6).wait, milliseconds(0));
}

TEST(NoticeBudget, NoRateMeasuredYetMeansTheDefaultRate) {
  const NoticeBudget unmeasured = ComputeNoticeBudget(milliseconds(120'000), 500ull << 20, 0);
  const NoticeBudget assumed =
      ComputeNoticeBudget(milliseconds(120'000), 500ull << 20, kDefaultUploadBytesPerSecond);
  EXPECT_EQ(unmeasured.wait, assumed.wait);
  EXPECT_EQ(unmeasured.upload_estimate, milliseconds(10'000));  // 500 MiB at 50 MiB/s
}

TEST(NoticeBudget, AHugeCheckpointAtACrawlDoesNotOverflow) {
  const NoticeBudget b = ComputeNoticeBudget(milliseconds(120'000), UINT64_MAX, 1e-300);
  EXPECT_EQ(b.wait, milliseconds(0));
  EXPECT_GT(b.upload_estimate, milliseconds(120'000));
}

}  // namespace
}  // namespace sg::testing
