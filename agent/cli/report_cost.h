// The cost part of `spotguard report` (docs/operations.md, "Cost"): each
// attempt's hours (launch to last event) at its instance's price, the same
// hours on demand, and the saving. An attempt's prices are the ones its
// agent measured at start (the ledger's "prices" event: EC2's spot price,
// the Price List's on-demand price), unless the `prices` config key names
// its instance type: a configured price wins over a measured one, each
// price on its own.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "agent/config/prices.h"
#include "agent/ledger/goodput.h"
#include "agent/ledger/ledger.h"

namespace sg {

// The prices of one attempt's hours, USD per hour, with where each came
// from: "measured" or "configured" ("" with no price).
struct AttemptPrices {
  std::optional<double> paid;  // spot, or on demand for an on-demand instance
  std::optional<double> on_demand;
  std::string paid_source, on_demand_source;
};
AttemptPrices PricesOf(const LedgerAttempt& attempt, const PriceTable& configured);

// Adds an attempt's "price_usd_per_hour", "price_source",
// "on_demand_usd_per_hour", "on_demand_price_source" and "cost_usd" (null
// when unpriced) to its report object `j`.
void AddAttemptCost(nlohmann::ordered_json& j, const AttemptGoodput& g,
                    const PriceTable& configured);

// The job's cost: "usd", "on_demand_usd", "saving_usd", "saving_fraction",
// "instance_hours", "prices" ("measured", "configured" or "measured and
// configured"), "complete" and the instance types left "unpriced"; null
// when no attempt has a price.
nlohmann::ordered_json CostJson(const Goodput& g, const PriceTable& configured);

// The text report's cost lines.
std::string CostText(const nlohmann::ordered_json& cost);
// ", $0.84 at $0.4523/h (measured)" for an attempt object with a price; "" without.
std::string AttemptCostText(const nlohmann::ordered_json& attempt);

}  // namespace sg
