// The names inside the store's keys that the agent prints and parses
// (docs/design.md §4): seqs, rounds and generations in ten decimal digits,
// so that name order is numeric order, and the parts of a log segment's
// name. The keys themselves are built by the repository alone
// (agent/repo/repository.h, agent/repo/store_layout.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sg {

// "0000000042".
std::string SeqName(uint64_t seq);
std::optional<uint64_t> ParseSeqName(std::string_view name);

// "2026-11-22T08:22:00.123Z" as "20261122T082200.123Z": an event's or a log
// segment's stamp.
std::string CompactStamp(std::string_view time_utc);

// A shipped log segment (docs/design.md §13). The attempt is the lease
// generation of the agent that wrote it; `seq` numbers the segments of that
// agent; `stamp` is the time of its first line, in CompactStamp's form. Name
// order within an instance is (generation, seq) order.
struct LogSegmentName {
  std::string instance;
  uint64_t generation = 0;
  uint64_t seq = 0;
  std::string stamp;
};

}  // namespace sg
