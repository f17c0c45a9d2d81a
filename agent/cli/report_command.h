// `spotguard report [--since DUR] [--json] [--html FILE]`: the job's ledger,
// goodput by cause, interruptions and checkpoint cost (docs/operations.md).
// Reads only; works from any machine that can read the store.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "agent/config/config.h"

namespace sg {

struct ReportOptions {
  bool json = false;
  std::string html_file;  // "": no page
  std::optional<std::chrono::milliseconds> since;  // only attempts running in the last DUR
};

// Exit code: 0; 1 when the store cannot be read or the page cannot be written;
// 2 when the `prices` config key does not parse.
int RunReportCommand(const Config& config, const std::map<std::string, std::string>& env,
                     const ReportOptions& options);

}  // namespace sg
