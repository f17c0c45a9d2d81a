// What `spotguard report` says of a job (docs/operations.md, "spotguard
// report"): the ledger's attempts and their goodput by cause, as one JSON
// object (--json), as text for people, and as the page of agent/cli/report_html.h.
// Pure: the events in, the report out.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "agent/ledger/goodput.h"
#include "agent/ledger/ledger.h"
#include "agent/config/prices.h"

namespace sg {

struct ReportInput {
  std::string job;
  std::vector<nlohmann::json> events;  // the job's, any order
  // Only attempts that were still running at or after this time.
  std::optional<LedgerMs> since;
  // The `prices` key: each price set wins over the one the agent measured
  // (agent/cli/report_cost.h).
  PriceTable prices;
};

// The report as one object; every time is UTC ("...Z"), every duration seconds.
nlohmann::ordered_json BuildReport(const ReportInput& input);

// The text summary of a BuildReport object.
std::string ReportToText(const nlohmann::ordered_json& report);

}  // namespace sg
