#include "agent/cli/report_cost.h"

#include <algorithm>

#include "common/log.h"

namespace sg {
namespace {

// A configured price first, then the measured one.
std::optional<double> Pick(std::optional<double> configured, std::optional<double> measured,
                           std::string& source) {
  if (configured) {
    source = "configured";
    return configured;
  }
  if (measured) {
    source = "measured";
    return measured;
  }
  source.clear();
  return std::nullopt;
}

double HoursOf(const AttemptGoodput& g) { return static_cast<double>(g.end - g.begin) / 3.6e6; }

nlohmann::ordered_json OrNull(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json SourceOrNull(const std::string& source) {
  return source.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(source);
}

}  // namespace

AttemptPrices PricesOf(const LedgerAttempt& attempt, const PriceTable& configured) {
  auto it = configured.find(attempt.instance_type);
  const InstancePrice set = it == configured.end() ? InstancePrice{} : it->second;
  AttemptPrices p;
  p.on_demand = Pick(set.on_demand, attempt.on_demand_price, p.on_demand_source);
  if (attempt.lifecycle == "on-demand") {
    p.paid = p.on_demand;
    p.paid_source = p.on_demand_source;
  } else {  // spot, or unknown
    p.paid = Pick(set.spot, attempt.spot_price, p.paid_source);
  }
  return p;
}

void AddAttemptCost(nlohmann::ordered_json& j, const AttemptGoodput& g,
                    const PriceTable& configured) {
  const AttemptPrices p = PricesOf(*g.attempt, configured);
  j["price_usd_per_hour"] = OrNull(p.paid);
  j["price_source"] = SourceOrNull(p.paid_source);
  j["on_demand_usd_per_hour"] = OrNull(p.on_demand);
  j["on_demand_price_source"] = SourceOrNull(p.on_demand_source);
  j["cost_usd"] = p.paid ? nlohmann::ordered_json(HoursOf(g) * *p.paid) : nullptr;
}

nlohmann::ordered_json CostJson(const Goodput& g, const PriceTable& configured) {
  double usd = 0, on_demand = 0, hours_total = 0;
  bool complete = true, measured = false, set = false;
  std::vector<std::string> unpriced;
  for (const AttemptGoodput& a : g.attempts) {
    const double hours = HoursOf(a);
    hours_total += hours;
    const AttemptPrices p = PricesOf(*a.attempt, configured);
    if (!p.paid || !p.on_demand) {
      complete = false;
      const std::string& type = a.attempt->instance_type;
      if (std::find(unpriced.begin(), unpriced.end(), type) == unpriced.end()) {
        unpriced.push_back(type);
      }
      continue;
    }
    for (const std::string* source : {&p.paid_source, &p.on_demand_source}) {
      measured |= *source == "measured";
      set |= *source == "configured";
    }
    usd += hours * *p.paid;
    on_demand += hours * *p.on_demand;
  }
  // Neither measured nor configured: the cost is unknown.
  if (!measured && !set && configured.empty()) return nullptr;
  return {{"usd", usd},
          {"on_demand_usd", on_demand},
          {"saving_usd", on_demand - usd},
          {"saving_fraction", on_demand > 0 ? (on_demand - usd) / on_demand : 0.0},
          {"instance_hours", hours_total},
          {"prices", measured && set ? "measured and configured"
                     : measured      ? "measured"
                                     : "configured"},
          {"complete", complete},
          {"unpriced", unpriced}};
}

std::string CostText(const nlohmann::ordered_json& cost) {
  if (cost.is_null()) {
    return "cost: unknown (no price measured by the agents or configured: the `prices` key, "
           "docs/operations.md)\n";
  }
  std::string out = Format(
      "cost: ${:.2f} for {:.2f} instance-hours; on demand ${:.2f}; saving ${:.2f} ({:.0f}%); "
      "prices {}\n",
      cost["usd"].get<double>(), cost["instance_hours"].get<double>(),
      cost["on_demand_usd"].get<double>(), cost["saving_usd"].get<double>(),
      100 * cost["saving_fraction"].get<double>(), cost["prices"].get<std::string>());
  if (!cost["complete"].get<bool>()) {
    out += "  not counted, no price measured or configured for: " + cost["unpriced"].dump() + "\n";
  }
  return out;
}

std::string AttemptCostText(const nlohmann::ordered_json& a) {
  if (!a.contains("cost_usd") || a["cost_usd"].is_null()) return "";
  return Format(", ${:.2f} at ${:.4f}/h ({})", a["cost_usd"].get<double>(),
                a["price_usd_per_hour"].get<double>(), a["price_source"].get<std::string>());
}

}  // namespace sg
