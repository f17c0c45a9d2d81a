// Completion that must be earned (agent/detect/completion.h) and the engine's
// retry budget warning (agent/run/retry_budget.h): pure functions.
#include "agent/detect/completion.h"

#include <gtest/gtest.h>

#include "agent/run/retry_budget.h"

namespace sg::testing {
namespace {

TEST(CompletionTest, AnExitBelowStepAtLeastIsUnearnedAndSaysWhy) {
  CompleteWhen when;
  when.step_at_least = 100000;
  EXPECT_EQ(UnmetCompletion(when, 61200, false),
            "exited 0 at step 61200, below step_at_least 100000");
  EXPECT_EQ(UnmetCompletion(when, std::nullopt, false),
            "exited 0 at step unknown, below step_at_least 100000");
  EXPECT_FALSE(UnmetCompletion(when, 100000, false));
  EXPECT_FALSE(UnmetCompletion(when, 100001, false));
}

TEST(CompletionTest, AFileThatMustExistIsChecked) {
  CompleteWhen when;
  when.file_exists = "DONE";
  EXPECT_EQ(UnmetCompletion(when, 5, false),
            "exited 0 without DONE in the checkpoint dir (file_exists)");
  EXPECT_FALSE(UnmetCompletion(when, 5, true));
}

TEST(CompletionTest, BothConditionsMustHold) {
  CompleteWhen when{.step_at_least = 10, .file_exists = "DONE"};
  EXPECT_EQ(UnmetCompletion(when, 5, false),
            "exited 0 at step 5, below step_at_least 10, and without DONE in the checkpoint dir "
            "(file_exists)");
  EXPECT_TRUE(UnmetCompletion(when, 10, false));
  EXPECT_TRUE(UnmetCompletion(when, 5, true));
  EXPECT_FALSE(UnmetCompletion(when, 10, true));
}

TEST(RetryBudgetTest, AnAttemptWithin2OfTheCapIsWarnedAbout) {
  EXPECT_FALSE(AttemptBudgetWarning(7, 10));
  auto eight = AttemptBudgetWarning(8, 10);
  ASSERT_TRUE(eight);
  EXPECT_NE(eight->find("attempt 8 of at most 10: 2 retries left"), std::string::npos) << *eight;
  EXPECT_NE(AttemptBudgetWarning(9, 10)->find("1 retry left"), std::string::npos);
  EXPECT_NE(AttemptBudgetWarning(10, 10)->find("the engine's last attempt"), std::string::npos);
}

TEST(RetryBudgetTest, NothingIsSaidWithoutAnAttemptOrACap) {
  EXPECT_FALSE(AttemptBudgetWarning(std::nullopt, 10));
  EXPECT_FALSE(AttemptBudgetWarning(9, 0));
}

}  // namespace
}  // namespace sg::testing
