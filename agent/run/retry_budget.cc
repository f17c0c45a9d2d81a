#include "agent/run/retry_budget.h"

namespace sg {

std::optional<std::string> AttemptBudgetWarning(std::optional<int64_t> attempt, int cap) {
  if (!attempt || cap <= 0) return std::nullopt;
  const int64_t left = cap - *attempt;
  if (left > kAttemptsWarnedBefore) return std::nullopt;
  const std::string where =
      "attempt " + std::to_string(*attempt) + " of at most " + std::to_string(cap);
  if (left <= 0) {
    return where +
           ": the engine's last attempt; if it is interrupted the engine will not retry it "
           "(raise retryStrategy.attempts / backoffLimit, or keep preemptions out of the budget: "
           "docs/fleet.md)";
  }
  return where + ": " + std::to_string(left) + (left == 1 ? " retry" : " retries") +
         " left before the engine gives up on the job (docs/fleet.md, \"Retry budgets\")";
}

}  // namespace sg
