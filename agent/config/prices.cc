#include "agent/config/prices.h"

#include <cmath>
#include <cstdlib>

namespace sg {
namespace {

// "" -> nullopt; else a finite, non-negative number or an error.
StatusOr<std::optional<double>> ParsePrice(const std::string& text, const std::string& entry) {
  if (text.empty()) return std::optional<double>();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v) || v < 0) {
    return Status::InvalidArgument("\"" + entry + "\": \"" + text +
                                   "\" is not a price in USD per hour");
  }
  return std::optional<double>(v);
}

}  // namespace

StatusOr<PriceTable> ParsePrices(const std::vector<std::string>& entries) {
  PriceTable table;
  for (const std::string& entry : entries) {
    const size_t eq = entry.find('=');
    const size_t slash = entry.find('/', eq == std::string::npos ? 0 : eq);
    if (eq == std::string::npos || eq == 0 || slash == std::string::npos) {
      return Status::InvalidArgument("\"" + entry +
                                     "\" is not TYPE=SPOT/ON_DEMAND (e.g. g5.xlarge=0.45/1.006)");
    }
    SG_ASSIGN_OR_RETURN(std::optional<double> spot,
                        ParsePrice(entry.substr(eq + 1, slash - eq - 1), entry));
    SG_ASSIGN_OR_RETURN(std::optional<double> on_demand, ParsePrice(entry.substr(slash + 1), entry));
    const std::string type = entry.substr(0, eq);
    if (table.contains(type)) {
      return Status::InvalidArgument("\"" + type + "\" has two prices");
    }
    table[type] = InstancePrice{spot, on_demand};
  }
  return table;
}

}  // namespace sg
