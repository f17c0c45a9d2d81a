// How a checkpoint found on the local disk at start compares with the
// store's history (docs/design.md, "Restore at start"). A local checkpoint
// that the store does not hold is never thrown away: the agent resumes from
// it and uploads it first.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/detect/checkpoint.h"
#include "agent/repo/manifest.h"

namespace sg {

enum class LocalStanding {
  kInStore,  // the newest snapshot holds it (same files and bytes, or the same step)
  kOlder,    // an older step than the newest snapshot's, or the bytes of an older snapshot
  kNewer,    // a later step than the newest snapshot's, or the store has none
  kUnknown,  // no step to compare and bytes the store does not hold
};

struct LocalComparison {
  LocalStanding standing = LocalStanding::kUnknown;
  std::optional<uint64_t> seq;  // the snapshot compared with (the newest, or the match)
  std::string why;              // for the log: what decided it
};

// `history`: the job's readable manifests, newest first. Reads the local
// files (SHA-256) only when steps cannot decide and the sizes match; a file
// still recorded by the restore marker as restored from that snapshot is
// not read again.
LocalComparison CompareLocalCheckpoint(const std::string& checkpoint_dir, const Checkpoint& local,
                                       const std::vector<Manifest>& history);

}  // namespace sg
