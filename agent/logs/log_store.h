// The shipped log segments of a job as the store holds them (docs/design.md
// §13): listed in order, the newest found, old attempts removed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/repo/repository.h"
#include "common/object_store.h"

namespace sg {

// Every segment under <job>/logs/, in reading order: attempt (lease
// generation), then seq, then first-line time; keys that are not segments
// are left out.
StatusOr<std::vector<StoredLogSegment>> ListLogSegments(ObjectStore& store, const std::string& job);

// The newest segment of the newest attempt; nullopt when there is none.
StatusOr<std::optional<StoredLogSegment>> NewestLogSegment(ObjectStore& store,
                                                           const std::string& job);

struct LogPruneResult {
  std::vector<uint64_t> attempts_removed;
  uint64_t objects_deleted = 0;
};

// Keeps the segments of the newest `keep` attempts and deletes the rest.
StatusOr<LogPruneResult> PruneLogs(ObjectStore& store, const std::string& job, int keep);

}  // namespace sg
