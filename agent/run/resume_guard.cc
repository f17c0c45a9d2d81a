#include "agent/run/resume_guard.h"

namespace sg {

void ResumeGuard::Started(std::optional<uint64_t> seq, std::optional<CheckpointMark> mark) {
  if (seq != seq_) exits_.clear();
  seq_ = seq;
  mark_ = std::move(mark);
}

std::optional<SuspectVerdict> ResumeGuard::Exited(const ExitStatus& status,
                                                  const std::optional<Checkpoint>& newest_local) {
  if (!seq_) return std::nullopt;
  const bool progressed = newest_local && (!mark_ || IsNewerThan(*newest_local, *mark_));
  if (status.success() || progressed) {
    // It got past the resume: the snapshot is good.
    seq_.reset();
    exits_.clear();
    return std::nullopt;
  }
  exits_.push_back(status.ToString());
  if (static_cast<int>(exits_.size()) < max_failures_) return std::nullopt;
  SuspectVerdict verdict{*seq_, std::move(exits_)};
  seq_.reset();
  exits_.clear();
  return verdict;
}

}  // namespace sg
