#include "agent/detect/completion.h"

#include <filesystem>

#include "agent/detect/presets.h"

namespace sg {

std::optional<std::string> UnmetCompletion(const CompleteWhen& when, std::optional<int64_t> step,
                                           bool file_present) {
  std::string why;
  if (when.step_at_least && (!step || *step < *when.step_at_least)) {
    why = "exited 0 at step " + (step ? std::to_string(*step) : std::string("unknown")) +
          ", below step_at_least " + std::to_string(*when.step_at_least);
  }
  if (when.file_exists && !file_present) {
    why += (why.empty() ? "exited 0 without " : ", and without ") + *when.file_exists +
           " in the checkpoint dir (file_exists)";
  }
  if (why.empty()) return std::nullopt;
  return why;
}

std::optional<int64_t> NewestStepWritten(const std::string& checkpoint_dir) {
  std::optional<int64_t> newest;
  auto listed = ListCheckpointDir(checkpoint_dir);
  if (!listed.ok()) return newest;
  for (const ListedFile& f : *listed) {
    if (auto step = ParseStep(f.relpath); step && (!newest || *step > *newest)) newest = step;
  }
  return newest;
}

std::optional<std::string> UnearnedExit(const CompleteWhen& when,
                                        const std::string& checkpoint_dir) {
  std::error_code ec;
  const bool present =
      when.file_exists && std::filesystem::exists(checkpoint_dir + "/" + *when.file_exists, ec);
  return UnmetCompletion(when, NewestStepWritten(checkpoint_dir), present);
}

}  // namespace sg
