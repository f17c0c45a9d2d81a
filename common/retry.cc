#include "common/retry.h"

#include <algorithm>
#include <memory>
#include <random>

namespace sg {

std::string_view OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kSuccess:
      return "success";
    case Outcome::kThrottled:
      return "throttled";
    case Outcome::kServerError:
      return "server error";
    case Outcome::kTransient:
      return "transient network error";
    case Outcome::kClockSkew:
      return "clock skew";
    case Outcome::kFatal:
      return "fatal";
  }
  return "unknown";
}

UniformRandom DefaultRandom() {
  auto rng = std::make_shared<std::mt19937_64>(std::random_device{}());
  auto mu = std::make_shared<std::mutex>();
  return [rng, mu] {
    std::lock_guard<std::mutex> lock(*mu);
    return std::uniform_real_distribution<double>(0.0, 1.0)(*rng);
  };
}

bool RetryBudget::TryAcquire(Outcome o) {
  const int cost = o == Outcome::kThrottled ? 10 : 5;
  std::lock_guard<std::mutex> lock(mu_);
  if (tokens_ < cost) return false;
  tokens_ -= cost;
  return true;
}

void RetryBudget::OnSuccess() {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_ = std::min(capacity_, tokens_ + 1);
}

int RetryBudget::tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_;
}

Duration BackoffDelay(const RetryPolicy& policy, int retry, const UniformRandom& random) {
  const int shift = std::clamp(retry - 1, 0, 30);
  const double ceiling = std::min(
      static_cast<double>(policy.max_delay.count()),
      static_cast<double>(policy.base_delay.count()) * static_cast<double>(int64_t{1} << shift));
  return Duration(static_cast<int64_t>(random() * ceiling));
}

bool IsRetryable(Outcome o) {
  return o == Outcome::kThrottled || o == Outcome::kServerError || o == Outcome::kTransient ||
         o == Outcome::kClockSkew;
}

}  // namespace sg
