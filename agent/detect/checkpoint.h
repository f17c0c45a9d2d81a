// What a preset found in the checkpoint directory: one complete checkpoint,
// named by the files that make it up, and how to order checkpoints by
// newness. See docs/checkpoints.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sg {

struct Checkpoint {
  // Stable name within the checkpoint dir: the directory ("checkpoint-500"),
  // the file ("step_300.pt"), or the common prefix ("snap_iter_1000", "ckpt-3").
  std::string id;
  // Training step or iteration, when the preset can read it from the names.
  std::optional<int64_t> step;
  // Files relative to checkpoint_dir, sorted, never "..", never absolute.
  std::vector<std::string> relpaths;
  // Relative path handed to the trainer as {resume}; "." is checkpoint_dir.
  std::string resume;
  // The newest modification time among relpaths.
  std::chrono::system_clock::time_point newest_mtime;
};

// Sorts newest first: by step, then by newest_mtime, then by id. A checkpoint
// whose names carry no step ("last.ckpt") ranks with the highest step among
// the checkpoints written no later than it, so it wins over those by time
// and loses to any stepped checkpoint written after it.
void SortNewestFirst(std::vector<Checkpoint>& checkpoints);

// What is remembered of the last committed checkpoint, so that only newer
// ones are uploaded again.
struct CheckpointMark {
  std::string id;
  std::optional<int64_t> step;
  std::chrono::system_clock::time_point newest_mtime;

  static CheckpointMark Of(const Checkpoint& c) { return {c.id, c.step, c.newest_mtime}; }
};

// True when `c` holds a later training state than `mark`: a higher step when
// both have one (a rewrite of the same step is not newer), otherwise a newer
// newest_mtime.
bool IsNewerThan(const Checkpoint& c, const CheckpointMark& mark);

// The first of `newest_first` that is newer than `mark` (any, without a mark).
std::optional<Checkpoint> FirstNewerThan(const std::vector<Checkpoint>& newest_first,
                                         const std::optional<CheckpointMark>& mark);

// The size of `c`'s files in `checkpoint_dir` now (files gone count 0).
uint64_t CheckpointBytes(const std::string& checkpoint_dir, const Checkpoint& c);

// Paths the agent itself creates inside or beside checkpoint_dir (staging,
// restore temporaries): any component starting with ".spotguard". They are
// never watched, listed or captured.
bool IsAgentPrivatePath(std::string_view relpath);

}  // namespace sg
