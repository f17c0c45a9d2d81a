// Ships sealed log segments to the store (docs/design.md §13): each one
// compressed as one zstd frame under
// <job>/logs/<instance>/<generation>-<seq>-<first-line time>.log.zst, oldest
// first, one PUT per segment. A segment that fails to go up stays for the
// next call; one rotated away locally before that is lost (counted).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "common/log_segments.h"
#include "common/object_store.h"

namespace sg {

struct LogShipResult {
  int shipped = 0;
  uint64_t bytes = 0;         // raw bytes shipped
  uint64_t stored_bytes = 0;  // what they took compressed
  std::string newest_key;     // of the last segment shipped; "" when none
  Status status;              // the first failure
};

// zstd level of the segments: text compresses well at the fastest levels.
inline constexpr int kLogSegmentLevel = 3;

class LogShipper {
 public:
  // Everything given must outlive the shipper.
  LogShipper(ObjectStore& store, LogSegments& segments, std::string job, std::string instance)
      : store_(store), segments_(segments), job_(std::move(job)), instance_(std::move(instance)) {}

  // Seals the current segment (when `seal`) and uploads every sealed
  // segment not yet shipped, attributed to lease `generation`. Stops
  // between segments once `*stop` is set, and at the first failure.
  LogShipResult Ship(uint64_t generation, bool seal = true,
                     const std::atomic<bool>* stop = nullptr);

 private:
  ObjectStore& store_;
  LogSegments& segments_;
  const std::string job_, instance_;
};

}  // namespace sg
