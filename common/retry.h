// Retrying calls to remote services: a classifier that says what an outcome
// means, separate from the policy that decides whether and when to try again
// (full-jitter exponential backoff, capped, with a retry budget shared by all
// calls of a client so a sick service is not hammered).
#pragma once

#include <chrono>
#include <functional>
#include <mutex>

#include "common/duration.h"
#include "common/status.h"

namespace sg {

enum class Outcome {
  kSuccess,
  kThrottled,    // 429, 503 SlowDown: the service asks us to slow down
  kServerError,  // 500, 502, 503, 504: the service failed this time
  kTransient,    // no response: reset, refused, timeout
  kClockSkew,    // RequestTimeTooSkewed: correct the clock and resend
  kFatal,        // anything else: retrying cannot help
};

std::string_view OutcomeName(Outcome o);

// A uniform random number in [0, 1); injectable so tests know every wait.
using UniformRandom = std::function<double()>;
UniformRandom DefaultRandom();

struct RetryPolicy {
  int max_attempts = 8;  // including the first
  Duration base_delay{100};
  Duration max_delay{20'000};
  // Token bucket shared by all requests of a client: a retry of a transient
  // failure costs 5 tokens, of a throttle 10 (as the AWS SDKs' standard
  // mode); a success on the first attempt returns 1. With the bucket empty,
  // failures are returned instead of retried.
  int budget_capacity = 500;
};

class RetryBudget {
 public:
  explicit RetryBudget(int capacity) : capacity_(capacity), tokens_(capacity) {}
  // Takes the cost of retrying after `o`; false when the budget cannot pay.
  bool TryAcquire(Outcome o);
  void OnSuccess();
  int tokens() const;

 private:
  mutable std::mutex mu_;
  const int capacity_;
  int tokens_;
};

// The wait before retry number `retry` (1 for the first retry): uniform in
// [0, min(max_delay, base_delay * 2^(retry-1))].
Duration BackoffDelay(const RetryPolicy& policy, int retry, const UniformRandom& random);

// Whether a failed attempt should be tried again.
bool IsRetryable(Outcome o);

}  // namespace sg
