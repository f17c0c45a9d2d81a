#include "agent/run/notice_budget.h"

#include <algorithm>
#include <cmath>

namespace sg {

NoticeBudget ComputeNoticeBudget(std::chrono::milliseconds left, uint64_t expected_bytes,
                                 double bytes_per_second) {
  using std::chrono::milliseconds;
  const double rate = bytes_per_second > 0 ? bytes_per_second : kDefaultUploadBytesPerSecond;
  // Capped at a day: a checkpoint that big at that rate never fits anyway,
  // and the cast must not overflow.
  const double estimate_ms =
      std::min(1000.0 * static_cast<double>(expected_bytes) / rate, 86'400'000.0);
  NoticeBudget budget;
  budget.upload_estimate = milliseconds(static_cast<int64_t>(std::ceil(estimate_ms)));
  budget.wait = std::max(milliseconds(0), left - budget.upload_estimate - kNoticeSafety);
  return budget;
}

}  // namespace sg
