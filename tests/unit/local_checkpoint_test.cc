// A local checkpoint found at start is compared with the store's history by
// step when both have one, by bytes otherwise (agent/run/local_checkpoint.h).
// Each preset's naming is covered: names without a step (last.pt, model.pt,
// last.ckpt, a DCP dir called "latest") must never lose to the store just
// because there is no number to compare.
#include "agent/run/local_checkpoint.h"

#include <gtest/gtest.h>

#include "agent/detect/presets.h"
#include "agent/repo/restorer.h"
#include "agent/repo/snapshot_writer.h"
#include "common/file_store.h"
#include "common/files.h"
#include "common/crypto.h"
#include "tests/support/file_store_fixture.h"
#include "tests/support/random_bytes.h"

namespace sg::testing {
namespace {

class LocalCheckpointTest : public FileStoreTest {
 protected:
  std::string Ckpt() { return dir_.Join("ckpt"); }

  Checkpoint Newest(Preset preset, std::vector<std::string> patterns = {}) {
    CheckpointDetector detector(Ckpt(), preset, std::move(patterns));
    auto listed = ListCheckpointDir(Ckpt());
    EXPECT_TRUE(listed.ok());
    auto found = detector.Detect(*listed, {});
    EXPECT_FALSE(found.empty());
    return found.empty() ? Checkpoint{} : found.front();
  }

  // Commits the checkpoint as it is on disk now; the history gains it first.
  void Commit(const Checkpoint& c) {
    SnapshotRequest req;
    req.job = "job";
    req.instance = "i";
    auto capture = CapturedCheckpoint::InPlace(Ckpt(), c);
    ASSERT_TRUE(capture.ok()) << capture.status().ToString();
    SnapshotWriter writer(*store_, clock_, SnapshotOptions{});
    auto r = writer.Write(*capture, req);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    history_.insert(history_.begin(), r->manifest);
  }

  LocalStanding Compare(const Checkpoint& c) {
    return CompareLocalCheckpoint(Ckpt(), c, history_).standing;
  }

  std::vector<Manifest> history_;
};

TEST_F(LocalCheckpointTest, AnEmptyStoreMakesAnyLocalCheckpointNewer) {
  WriteTree(Ckpt(), {{"last.pt", {"v1", 0644}}});
  EXPECT_EQ(Compare(Newest(Preset::kPytorch, {"*.pt"})), LocalStanding::kNewer);
}

// The reproduction: local version 8, store version 6, both called last.pt.
TEST_F(LocalCheckpointTest, ALastPtTheStoreDoesNotHoldIsNotLost) {
  WriteTree(Ckpt(), {{"last.pt", {"version 6", 0644}}});
  Commit(Newest(Preset::kPytorch, {"*.pt"}));
  WriteTree(Ckpt(), {{"last.pt", {"version 8", 0644}}});
  EXPECT_EQ(Compare(Newest(Preset::kPytorch, {"*.pt"})), LocalStanding::kUnknown);
}

TEST_F(LocalCheckpointTest, AModelPtWithTheStoresBytesIsInTheStore) {
  WriteTree(Ckpt(), {{"model.pt", {"weights", 0644}}});
  Commit(Newest(Preset::kPytorch, {"*.pt"}));
  EXPECT_EQ(Compare(Newest(Preset::kPytorch, {"*.pt"})), LocalStanding::kInStore);
}

TEST_F(LocalCheckpointTest, TheBytesOfAnOlderSnapshotAreOlder) {
  WriteTree(Ckpt(), {{"model.pt", {"old", 0644}}});
  Commit(Newest(Preset::kPytorch, {"*.pt"}));
  WriteTree(Ckpt(), {{"model.pt", {"new", 0644}}});
  Commit(Newest(Preset::kPytorch, {"*.pt"}));
  WriteTree(Ckpt(), {{"model.pt", {"old", 0644}}});
  EXPECT_EQ(Compare(Newest(Preset::kPytorch, {"*.pt"})), LocalStanding::kOlder);
}

TEST_F(LocalCheckpointTest, ALightningLastCkptIsJudgedByItsBytes) {
  WriteTree(Ckpt(), {{"last.ckpt", {"epoch 3", 0644}}});
  Commit(Newest(Preset::kLightning, {"*.ckpt"}));
  EXPECT_EQ(Compare(Newest(Preset::kLightning, {"*.ckpt"})), LocalStanding::kInStore);
  WriteTree(Ckpt(), {{"last.ckpt", {"epoch 4", 0644}}});
  EXPECT_EQ(Compare(Newest(Preset::kLightning, {"*.ckpt"})), LocalStanding::kUnknown);
}

TEST_F(LocalCheckpointTest, HuggingfaceCheckpointsAreOrderedByStep) {
  WriteTree(Ckpt(), {{"checkpoint-200/trainer_state.json", {"{}", 0644}},
                     {"checkpoint-200/model.safetensors", {"w200", 0644}}});
  Commit(Newest(Preset::kHuggingface));
  WriteTree(Ckpt(), {{"checkpoint-300/trainer_state.json", {"{}", 0644}},
                     {"checkpoint-300/model.safetensors", {"w300", 0644}}});
  EXPECT_EQ(Compare(Newest(Preset::kHuggingface)), LocalStanding::kNewer);
  std::filesystem::remove_all(Ckpt());
  WriteTree(Ckpt(), {{"checkpoint-100/trainer_state.json", {"{}", 0644}},
                     {"checkpoint-100/model.safetensors", {"w100", 0644}}});
  EXPECT_EQ(Compare(Newest(Preset::kHuggingface)), LocalStanding::kOlder);
  // The same step with other bytes (a rerun of the step): the same training state.
  std::filesystem::remove_all(Ckpt());
  WriteTree(Ckpt(), {{"checkpoint-200/trainer_state.json", {"{}", 0644}},
                     {"checkpoint-200/model.safetensors", {"other", 0644}}});
  EXPECT_EQ(Compare(Newest(Preset::kHuggingface)), LocalStanding::kInStore);
}

TEST_F(LocalCheckpointTest, ADcpDirWithoutAStepIsJudgedByItsBytes) {
  // DCP writes the shards first and .metadata last.
  WriteTree(Ckpt(),
            {{"latest/__0_0.distcp", {"shard0", 0644}}, {"latest/__1_0.distcp", {"shard1", 0644}}});
  WriteTree(Ckpt(), {{"latest/.metadata", {"meta", 0644}}});
  Commit(Newest(Preset::kDcp));
  EXPECT_EQ(Compare(Newest(Preset::kDcp)), LocalStanding::kInStore);
  WriteTree(Ckpt(), {{"latest/__1_0.distcp", {"shard1 later", 0644}}});
  WriteTree(Ckpt(), {{"latest/.metadata", {"meta 2", 0644}}});
  EXPECT_EQ(Compare(Newest(Preset::kDcp)), LocalStanding::kUnknown);
}

TEST_F(LocalCheckpointTest, ADcpDirWithAStepIsOrderedByIt) {
  WriteTree(Ckpt(), {{"step_200/__0_0.distcp", {"s", 0644}}});
  WriteTree(Ckpt(), {{"step_200/.metadata", {"m", 0644}}});
  Commit(Newest(Preset::kDcp));
  WriteTree(Ckpt(), {{"step_300/__0_0.distcp", {"s", 0644}}});
  WriteTree(Ckpt(), {{"step_300/.metadata", {"m", 0644}}});
  EXPECT_EQ(Compare(Newest(Preset::kDcp)), LocalStanding::kNewer);
}

TEST_F(LocalCheckpointTest, AFileMissingFromTheLocalCopyMakesItDifferent) {
  WriteTree(Ckpt(), {{"run/step_5/model.pt", {"m", 0644}}, {"run/step_5/optim.pt", {"o", 0644}}});
  Commit(Newest(Preset::kPytorch, {"*.pt"}));
  history_.front().step.reset();  // judge by bytes
  std::filesystem::remove(Ckpt() + "/run/step_5/optim.pt");
  Checkpoint c = Newest(Preset::kPytorch, {"*.pt"});
  c.step.reset();
  EXPECT_EQ(Compare(c), LocalStanding::kUnknown);
}

// Format 3 has no whole-file digest: a file of several frames is judged
// frame by frame, and one byte changed in its last frame tells.
TEST_F(LocalCheckpointTest, AFileOfSeveralFramesIsJudgedFrameByFrame) {
  std::string weights = RandomBytes(2 * kFrameSize + 4096, 11);
  WriteTree(Ckpt(), {{"model.pt", {weights, 0644}}});
  Commit(Newest(Preset::kPytorch, {"*.pt"}));
  ASSERT_EQ(history_.front().format, 3);
  ASSERT_TRUE(history_.front().files[0].sha256.empty());
  ASSERT_EQ(history_.front().files[0].frames.size(), 3u);
  EXPECT_EQ(Compare(Newest(Preset::kPytorch, {"*.pt"})), LocalStanding::kInStore);
  weights[2 * kFrameSize + 100] ^= 0x01;
  WriteTree(Ckpt(), {{"model.pt", {weights, 0644}}});
  EXPECT_EQ(Compare(Newest(Preset::kPytorch, {"*.pt"})), LocalStanding::kUnknown);
  // A frame without XXH3-128 (format 2 before it) is judged by its SHA-256.
  for (FrameRef& f : history_.front().files[0].frames) f.xxh3.clear();
  EXPECT_EQ(Compare(Newest(Preset::kPytorch, {"*.pt"})), LocalStanding::kUnknown);
  weights[2 * kFrameSize + 100] ^= 0x01;
  WriteTree(Ckpt(), {{"model.pt", {weights, 0644}}});
  EXPECT_EQ(Compare(Newest(Preset::kPytorch, {"*.pt"})), LocalStanding::kInStore);
}

// A format 2 snapshot's file is judged by its whole-file SHA-256.
TEST_F(LocalCheckpointTest, AFormat2FileIsJudgedByItsWholeFileDigest) {
  const std::string weights = RandomBytes(kFrameSize + 10, 12);
  WriteTree(Ckpt(), {{"model.pt", {weights, 0644}}});
  Commit(Newest(Preset::kPytorch, {"*.pt"}));
  Manifest& m = history_.front();
  m.format = 2;
  m.files[0].sha256 = Sha256Hex(weights);
  EXPECT_EQ(Compare(Newest(Preset::kPytorch, {"*.pt"})), LocalStanding::kInStore);
  m.files[0].sha256 = Sha256Hex("other bytes");  // the frames still match
  EXPECT_EQ(Compare(Newest(Preset::kPytorch, {"*.pt"})), LocalStanding::kUnknown);
}

}  // namespace
}  // namespace sg::testing
