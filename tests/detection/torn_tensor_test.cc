// A trainer killed in the middle of torch.save leaves a file that looks
// closed and settled. The pytorch and lightning presets recognise that it is
// not whole (its zip directory is missing) and never take it.
#include <gtest/gtest.h>

#include <filesystem>

#include "agent/detect/checkpoint_watcher.h"
#include "agent/detect/presets.h"
#include "common/clock.h"
#include "common/files.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

// Writes real torch.save and safetensors files with Debian's python3-torch.
void WriteTensorFiles(const std::string& dir) {
  const std::string script = R"(
import json, struct, sys, torch
d = sys.argv[1]
state = {"w": torch.randn(256, 256), "step": 100}
torch.save(state, d + "/step_100.pt")
torch.save(state, d + "/step_200.pt")
data = torch.randn(1000).numpy().tobytes()
header = json.dumps({"w": {"dtype": "F32", "shape": [1000], "data_offsets": [0, len(data)]}}).encode()
blob = struct.pack("<Q", len(header)) + header + data
open(d + "/step_300.safetensors", "wb").write(blob)
open(d + "/step_400.safetensors", "wb").write(blob)
)";
  auto r = RunCommand({SPOTGUARD_PYTHON, "-c", script, dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST(TornTensors, AHalfWrittenTorchSaveOrSafetensorsFileIsNotACheckpoint) {
  TempDir dir;
  const std::string ckpt = dir.Join("ckpt");
  std::filesystem::create_directories(ckpt);
  WriteTensorFiles(ckpt);
  // Killed halfway: the newest of each kind is cut short.
  std::filesystem::resize_file(ckpt + "/step_200.pt",
                               std::filesystem::file_size(ckpt + "/step_200.pt") / 2);
  std::filesystem::resize_file(ckpt + "/step_400.safetensors",
                               std::filesystem::file_size(ckpt + "/step_400.safetensors") - 100);
  CheckpointDetector detector(ckpt, Preset::kPytorch, {"*.pt", "*.safetensors"});
  auto found = DetectSettledNow(detector, std::chrono::nanoseconds(0), SystemClock());
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  std::vector<std::string> ids;
  for (const auto& c : *found) ids.push_back(c.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"step_300.safetensors", "step_100.pt"}));

  // The generic preset cannot know the format and takes what is settled.
  CheckpointDetector generic(ckpt, Preset::kGeneric, {"*.pt"});
  auto all = DetectSettledNow(generic, std::chrono::nanoseconds(0), SystemClock());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->front().id, "step_200.pt");
}

}  // namespace
}  // namespace sg::testing
