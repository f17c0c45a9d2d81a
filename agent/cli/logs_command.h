// `spotguard logs`: the shipped log segments of a job (docs/design.md §13),
// read back in order from any machine that can read the store, the
// trainer's and the agent's lines interleaved by time and labelled.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/logs/log_store.h"
#include "common/clock.h"
#include "common/duration.h"
#include "common/log_lines.h"
#include "common/object_store.h"

namespace sg {

struct LogsOptions {
  std::optional<std::string> instance;  // every attempt of this instance
  std::optional<uint64_t> attempt;      // this attempt (lease generation)
  std::optional<Duration> since;        // lines no older than this
  bool follow = false;                  // keep printing new segments
  bool json = false;                    // one JSON object per line
  std::chrono::milliseconds follow_interval{2000};
};

// The segments `options` select from `all` (in reading order): those of
// --attempt and/or --instance, or without either the newest attempt's.
std::vector<StoredLogSegment> SelectLogSegments(const std::vector<StoredLogSegment>& all,
                                                const LogsOptions& options);

// What printing a segment holds in memory besides the stored object and
// zstd's window (at most 8 MiB): the decoded piece and the line being
// gathered. Defaults as `spotguard logs` uses them.
struct LogPrintLimits {
  size_t piece = size_t{64} << 10;
  size_t max_line = 4 * kMaxLogLineBytes + 1024;  // a longer line is cut there
};

// Prints one segment's lines no older than `since_utc` ("" for all), as the
// segment is decoded, piece by piece (docs/design.md §13); returns the
// lines printed. Text lines have their control bytes escaped
// (EscapeControls), on a terminal or not. A segment that does not decode is
// an error, after the lines before the damage were printed.
StatusOr<uint64_t> PrintLogSegment(ObjectStore& store, const StoredLogSegment& segment,
                                   const std::string& since_utc, bool json, std::ostream& out,
                                   const LogPrintLimits& limits = {});

// Exit codes: 0; 1 the store cannot be read, or a segment could not be
// (it is skipped, named on stderr, and the others are printed); 3 no
// segment matches.
int RunLogsCommand(const Config& config, const std::map<std::string, std::string>& env,
                   const LogsOptions& options);

}  // namespace sg
