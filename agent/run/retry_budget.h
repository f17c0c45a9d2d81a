// The engine's retry budget (docs/fleet.md, "Retry budgets"): AWS Batch
// runs a job at most `retryStrategy.attempts` times (10 at most), a
// Kubernetes Job `backoffLimit` + 1 times. A trial that nears the cap is
// about to be given up on by the engine, whatever spotguard does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sg {

// Attempts within this many of the cap are warned about.
inline constexpr int64_t kAttemptsWarnedBefore = 2;

// The warning for attempt `attempt` (AWS_BATCH_JOB_ATTEMPT, 1 for the first)
// of a job the engine runs at most `cap` times; nullopt when either is not
// known (cap 0) or more than kAttemptsWarnedBefore attempts are left.
std::optional<std::string> AttemptBudgetWarning(std::optional<int64_t> attempt, int cap);

}  // namespace sg
