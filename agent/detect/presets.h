// Preset rules: which files in checkpoint_dir form a complete checkpoint, the
// step each one is at, and the path handed to the trainer to resume from.
// The rules are functions of a directory listing plus what the watcher knows
// about recent writes (agent/detect/checkpoint_watcher.h), so they are tested on
// synthetic listings; only the tensorflow rule also reads a file (the small
// `checkpoint` index). docs/checkpoints.md describes every preset.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/detect/checkpoint.h"
#include "agent/config/config.h"
#include "common/status.h"

namespace sg {

// One entry of checkpoint_dir, found by ListCheckpointDir.
struct ListedFile {
  std::string relpath;  // relative to checkpoint_dir
  bool is_symlink = false;
  // For a symlink: its target relative to checkpoint_dir when that target is
  // inside it (lexically), else empty.
  std::string symlink_target;
  uint64_t size = 0;
  mode_t mode = 0;
  std::chrono::system_clock::time_point mtime;
};

// Regular files and symlinks below `dir`, recursively, sorted by relpath.
// Symlinked directories are not followed; agent-private paths
// (IsAgentPrivatePath) are skipped; entries that vanish while listing are
// left out.
StatusOr<std::vector<ListedFile>> ListCheckpointDir(const std::string& dir);

// The step in a file or directory name: the last "step_N", "step=N",
// "step-N", "stepN", "global_stepN", "iter_N", "iteration_N" (so
// "epoch=3-step=400" is 400). Nothing for names without one.
std::optional<int64_t> ParseStep(std::string_view name);

// Names that writers use while a file is not finished and that are never part
// of a checkpoint: hidden names other than DCP's ".metadata", "*.tmp",
// "*.tmp<anything>", "*.temp", "*.part", "*.partial", "*~", and Python
// tempfile names ("tmpab12_x9z").
bool IsTempName(std::string_view basename);

// How long a file must stay unchanged after its last write, close or rename
// before it counts as finished (docs/checkpoints.md explains the values).
std::chrono::nanoseconds DefaultSettleTime(Preset preset);
// settle_time from the config, else the preset's default.
std::chrono::nanoseconds SettleTime(const Config& config);

class CheckpointDetector {
 public:
  // `checkpoint_dir` is read only by the tensorflow rule (its `checkpoint`
  // index files, which may also hold absolute paths). `patterns` select files for the
  // pytorch, generic and lightning presets (fnmatch; matched against the
  // basename, or against the relpath when the pattern holds a '/').
  CheckpointDetector(std::string checkpoint_dir, Preset preset, std::vector<std::string> patterns);
  static CheckpointDetector ForConfig(const Config& config);

  // The complete checkpoints in `files`, newest first (SortNewestFirst).
  // `unsettled` holds the relpaths that are still being written or changed
  // less than the settle time ago; a checkpoint holding one is not complete.
  // Warns once per path about each of SymlinksLeftOut.
  std::vector<Checkpoint> Detect(const std::vector<ListedFile>& files,
                                 const std::set<std::string>& unsettled) const;

  // This node's rank in a multi-node group (docs/multi-node.md), for the
  // rules that differ by node (the dcp preset's node markers); nothing for a
  // job of one node. Set when the node joins a round.
  void SetNodeRank(std::optional<int> rank) { node_rank_ = rank; }

  Preset preset() const { return preset_; }
  const std::string& checkpoint_dir() const { return checkpoint_dir_; }

  // The symlinks of `files` that no snapshot will hold: symlinks are never
  // followed (docs/checkpoints.md, "Symlinks"), so a symlinked checkpoint
  // file is never uploaded. Left out: hidden and temporary paths, and a link
  // to a regular file of the listing (Lightning's `last.ckpt`) unless it
  // lies inside one of the checkpoints `found`, which would then lack it.
  static std::vector<std::string> SymlinksLeftOut(const std::vector<ListedFile>& files,
                                                  const std::vector<Checkpoint>& found);
  // How many "is a symlink ... never uploaded" warnings Detect has logged:
  // one per path for the life of the detector and its copies.
  size_t symlink_warnings() const;

 private:
  struct Warned;
  std::string checkpoint_dir_;
  Preset preset_;
  std::vector<std::string> patterns_;
  std::optional<int> node_rank_;
  std::shared_ptr<Warned> warned_;
};

}  // namespace sg
