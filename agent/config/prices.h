// Instance prices for `spotguard report`'s cost (docs/operations.md,
// "Cost"): the `prices` config key, one entry per instance type,
// "TYPE=SPOT/ON_DEMAND" in USD per hour ("g5.xlarge=0.4523/1.006"); either
// price may be left empty ("g5.xlarge=/1.006").
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sg {

struct InstancePrice {
  std::optional<double> spot, on_demand;  // USD per hour
};
using PriceTable = std::map<std::string, InstancePrice>;  // by instance type

// InvalidArgument naming the entry and what is wrong.
StatusOr<PriceTable> ParsePrices(const std::vector<std::string>& entries);

}  // namespace sg
