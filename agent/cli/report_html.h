// `spotguard report --html FILE`: one self-contained page (inline CSS, SVG
// and a few lines of script; nothing fetched when it is viewed) with the
// timeline (one lane per node, one bar per attempt coloured by cause,
// notices, commits with their steps, lost work shaded), the goodput
// breakdown and the table of attempts (docs/operations.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sg {

// REQUIRES: `report` is a BuildReport object (agent/cli/report.h).
std::string ReportToHtml(const nlohmann::ordered_json& report);

}  // namespace sg
