#include "agent/cli/logs_command.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "agent/config/exit_codes.h"
#include "agent/repo/open_store.h"
#include "common/log_lines.h"
#include "common/zstd_stream.h"

namespace sg {
namespace {

bool Selected(const StoredLogSegment& s, const LogsOptions& options,
              std::optional<uint64_t> attempt) {
  if (options.instance && s.name.instance != *options.instance) return false;
  if (attempt && s.name.generation != *attempt) return false;
  return true;
}

}  // namespace

std::vector<StoredLogSegment> SelectLogSegments(const std::vector<StoredLogSegment>& all,
                                                const LogsOptions& options) {
  std::optional<uint64_t> attempt = options.attempt;
  if (!attempt && !options.instance && !all.empty()) attempt = all.back().name.generation;
  std::vector<StoredLogSegment> out;
  for (const StoredLogSegment& s : all) {
    if (Selected(s, options, attempt)) out.push_back(s);
  }
  return out;
}

StatusOr<uint64_t> PrintLogSegment(ObjectStore& store, const StoredLogSegment& segment,
                                   const std::string& since_utc, bool json, std::ostream& out,
                                   const LogPrintLimits& limits) {
  SG_ASSIGN_OR_RETURN(std::string stored, store.Get(segment.key));
  uint64_t printed = 0;
  const std::string attempt = " #" + std::to_string(segment.name.generation) + " ";
  auto print = [&](std::string_view line, bool /*cut*/) {
    auto parsed = ParseLogLine(line);
    if (!parsed) return;  // the remains of a write that failed half-way
    // Fixed-width UTC times compare as strings.
    if (!since_utc.empty() && parsed->time < since_utc) return;
    if (json) {
      // JSON escapes control characters itself.
      nlohmann::ordered_json j;
      j["time"] = parsed->time;
      j["attempt"] = segment.name.generation;
      j["instance"] = segment.name.instance;
      j["source"] = parsed->source;
      j["text"] = parsed->text;
      out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      // Stored bytes never reach the terminal raw (EscapeControls).
      out << EscapeControls(parsed->time) << attempt << EscapeControls(parsed->source) << " "
          << EscapeControls(parsed->text) << "\n";
    }
    ++printed;
  };
  LineSplitter lines(limits.max_line);
  const Status decoded = DecodeZstdInPieces(stored, limits.piece, [&](std::string_view piece) {
    lines.Feed(piece, print);
    return out ? Status::Ok() : Status::IOError("writing the lines failed");
  });
  if (decoded.ok()) lines.Finish(print);
  out.flush();
  if (!decoded.ok()) return Status::Corruption(segment.key + ": " + std::string(decoded.message()));
  return printed;
}

int RunLogsCommand(const Config& config, const std::map<std::string, std::string>& env,
                   const LogsOptions& options) {
  auto store = OpenStore(config, env, nullptr, StoreUse::kInteractive, StoreAccess::kReadOnly);
  if (!store.ok()) {
    std::cerr << "spotguard logs: " << store.status().message() << "\n";
    return StoreOpenExitCode(store.status());
  }
  const std::string since_utc =
      options.since ? FormatUtc(SystemClock().Now() - *options.since, /*millis=*/true) : "";
  std::set<std::string> printed;
  std::optional<uint64_t> following;  // without --attempt/--instance: the attempt followed
  bool any = false;
  bool damaged = false;  // a segment could not be read
  while (true) {
    auto all = ListLogSegments(**store, config.job);
    if (!all.ok()) {
      std::cerr << "spotguard logs: listing the logs of job " << config.job << " in "
                << (*store)->Describe() << ": " << all.status().message() << "\n";
      return kExitFailure;
    }
    std::vector<StoredLogSegment> chosen = SelectLogSegments(*all, options);
    if (following && !chosen.empty() && chosen.front().name.generation > *following) {
      std::cerr << "spotguard logs: attempt " << chosen.front().name.generation << " began on "
                << EscapeControls(chosen.front().name.instance) << "\n";
    }
    if (!chosen.empty()) following = chosen.front().name.generation;
    for (const StoredLogSegment& s : chosen) {
      if (!printed.insert(s.key).second) continue;
      auto n = PrintLogSegment(**store, s, since_utc, options.json, std::cout);
      if (!n.ok()) {
        // The other segments are still worth reading; the exit code says it.
        std::cerr << "spotguard logs: skipped " << EscapeControls(n.status().message()) << "\n";
        damaged = true;
        continue;
      }
      any = true;
    }
    if (!options.follow) break;
    std::this_thread::sleep_for(options.follow_interval);
  }
  if (!any) {
    std::cerr << "spotguard logs: the store " << (*store)->Describe()
              << " has no log segment of job " << config.job
              << (options.attempt ? ", attempt " + std::to_string(*options.attempt) : "")
              << (options.instance ? ", instance " + *options.instance : "") << "\n";
    return damaged ? kExitFailure : kExitNothingToRestore;
  }
  return damaged ? kExitFailure : kExitOk;
}

}  // namespace sg
