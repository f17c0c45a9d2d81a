// Captures of files read where they are (CapturedCheckpoint::InPlace), the
// way tests hand files to the snapshot writer.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "agent/detect/capture.h"
#include "tests/support/tree.h"

namespace sg::testing {

// Every file below `root`, read where it is, as a checkpoint of `step`
// resuming from `resume` ("." = the directory).
inline StatusOr<CapturedCheckpoint> CaptureTree(const std::string& root,
                                                std::optional<int64_t> step = std::nullopt,
                                                std::string resume = ".") {
  Checkpoint checkpoint;
  for (const auto& [rel, f] : ReadTree(root)) checkpoint.relpaths.push_back(rel);
  checkpoint.step = step;
  checkpoint.resume = std::move(resume);
  return CapturedCheckpoint::InPlace(root, std::move(checkpoint));
}

// One file, read where it is, as the checkpoint's only file `rel`.
inline StatusOr<CapturedCheckpoint> CaptureFile(const std::string& rel, const std::string& path,
                                                std::optional<int64_t> step = std::nullopt) {
  Checkpoint checkpoint;
  checkpoint.step = step;
  return CapturedCheckpoint::InPlace(std::map<std::string, std::string>{{rel, path}},
                                     std::move(checkpoint));
}

}  // namespace sg::testing
