// Which snapshot the trainer cannot resume from (docs/design.md §9, "A
// snapshot the trainer cannot resume from"). A pure tracker: the executor
// tells it what each (re)start resumes from and how each run ended; after
// `max_failures` failed runs from one snapshot, none of which wrote a
// checkpoint newer than the one it resumed from, it names that snapshot
// suspect. It touches no clock, process, file or store
// (tests/unit/resume_guard_test.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/detect/checkpoint.h"
#include "common/process.h"

namespace sg {

struct SuspectVerdict {
  uint64_t seq = 0;
  std::vector<std::string> exits;  // how each failed run ended ("exit code 3")
};

class ResumeGuard {
 public:
  // REQUIRES: max_failures >= 1.
  explicit ResumeGuard(int max_failures) : max_failures_(max_failures) {}

  // The trainer (re)starts from snapshot `seq`, whose checkpoint is `mark`;
  // nullopt seq: from nothing the store holds (fresh, or a local checkpoint
  // not uploaded yet), which is never suspected. Failures from the same seq
  // keep counting across restarts.
  void Started(std::optional<uint64_t> seq, std::optional<CheckpointMark> mark);
  // The trainer ended; `newest_local` is the newest complete local
  // checkpoint now. The verdict when this run makes the snapshot suspect
  // (the count then starts over). A run that wrote a newer checkpoint, or
  // ended with exit 0, clears the count.
  std::optional<SuspectVerdict> Exited(const ExitStatus& status,
                                       const std::optional<Checkpoint>& newest_local);

  std::optional<uint64_t> seq() const { return seq_; }
  int failures() const { return static_cast<int>(exits_.size()); }

 private:
  const int max_failures_;
  std::optional<uint64_t> seq_;
  std::optional<CheckpointMark> mark_;
  std::vector<std::string> exits_;
};

}  // namespace sg
