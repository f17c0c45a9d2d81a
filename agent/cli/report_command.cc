#include "agent/cli/report_command.h"

#include <iostream>

#include "agent/config/exit_codes.h"
#include "agent/config/prices.h"
#include "agent/cli/report.h"
#include "agent/cli/report_html.h"
#include "agent/repo/open_store.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/strings.h"

namespace sg {

int RunReportCommand(const Config& config, const std::map<std::string, std::string>& env,
                     const ReportOptions& options) {
  auto store = OpenStore(config, env, nullptr, StoreUse::kInteractive, StoreAccess::kReadOnly);
  if (!store.ok()) {
    std::cerr << "spotguard report: " << store.status().message() << "\n";
    return StoreOpenExitCode(store.status());
  }
  auto events = ReadJobEvents(**store, config.job);
  if (!events.ok()) {
    std::cerr << "spotguard report: reading the events of job " << config.job << " from "
              << (*store)->Describe() << ": " << events.status().message() << "\n";
    return kExitFailure;
  }
  auto prices = ParsePrices(config.prices);  // checked when the config was read
  if (!prices.ok()) {
    std::cerr << "spotguard report: prices: " << prices.status().message() << "\n";
    return kExitUsage;
  }
  ReportInput input{config.job, std::move(*events), std::nullopt, *prices};
  if (options.since) {
    const auto cutoff = SystemClock().Now() - *options.since;
    input.since =
        std::chrono::duration_cast<std::chrono::milliseconds>(cutoff.time_since_epoch()).count();
  }
  const nlohmann::ordered_json report = BuildReport(input);
  if (!options.html_file.empty()) {
    if (Status st = WriteFileAtomic(options.html_file, ReportToHtml(report)); !st.ok()) {
      std::cerr << "spotguard report: writing " << options.html_file << ": " << st.message()
                << "\n";
      return kExitFailure;
    }
  }
  if (options.json) {
    std::cout << report.dump(2) << "\n";
  } else {
    std::cout << ReportToText(report);
    if (!options.html_file.empty()) std::cout << "page written to " << options.html_file << "\n";
  }
  return kExitOk;
}

}  // namespace sg
