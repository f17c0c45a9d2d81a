// docs/format.md, "Restoring without spotguard": scripts/restore-by-hand.sh
// (AWS CLI ranged GETs, jq, zstd) restores a snapshot whose frames are
// partly references into an earlier snapshot's objects, on a real S3
// gateway, byte-identical, for every codec.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "agent/restorer.h"
#include "agent/snapshot_writer.h"
#include "common/files.h"
#include "tests/support/capture_in_place.h"
#include "tests/support/fake_clock.h"
#include "tests/support/random_bytes.h"
#include "tests/support/s3_test_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

// Float32 weights around zero: the codec chooses a shuffle for them.
std::string Weights(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::string s(count * 4, '\0');
  for (size_t i = 0; i < count; ++i) {
    const float v = dist(rng);
    std::memcpy(&s[i * 4], &v, 4);
  }
  return s;
}

class RestoreByHand : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(LoadS3TestEnv(&env_));
    prefix_ = "restore-by-hand/" + RandomHex(6);
    store_ = OpenTestS3Store(env_, prefix_);
    ASSERT_NE(store_, nullptr);
  }
  void TearDown() override {
    if (!store_) return;
    auto all = ListAll(*store_, "");
    if (!all.ok()) return;
    std::vector<std::string> keys;
    for (const auto& o : *all) keys.push_back(store_->FullKey(o.key));
    if (!keys.empty()) (void)store_->client().DeleteObjects(env_.bucket, keys);
  }
  StatusOr<SnapshotResult> Snapshot(const Tree& tree) {
    const std::string src = dir_.Join("src-" + std::to_string(++sources_));
    WriteTree(src, tree);
    SnapshotRequest req;
    req.job = "job";
    SG_ASSIGN_OR_RETURN(CapturedCheckpoint capture, CaptureTree(src));
    SnapshotWriter writer(*store_, clock_, SnapshotOptions{});
    return writer.Write(capture, req);
  }
  CommandResult ByHand(const std::string& out, const std::string& seq) {
    std::map<std::string, std::string> env = env_.AwsEnv();
    env["AWS_ARGS"] = "--endpoint-url " + env_.endpoint;
    std::vector<std::string> argv = {std::string(SPOTGUARD_SOURCE_DIR) + "/scripts/restore-by-hand.sh",
                                     "s3://" + env_.bucket + "/" + prefix_, "job", out};
    if (!seq.empty()) argv.push_back(seq);
    return RunCommand(argv, env, std::chrono::seconds(240));
  }

  S3TestEnv env_;
  std::string prefix_;
  std::unique_ptr<S3Store> store_;
  FakeClock clock_;
  TempDir dir_;
  int sources_ = 0;
};

TEST_F(RestoreByHand, ASnapshotOfReferencesRestoresWithAwsCliJqAndZstd) {
  const std::string base = Weights((kFrameSize + 4096) / 4, 1);  // two frames, shuffled
  std::string text;
  for (int i = 0; i < 3000; ++i) text += "step " + std::to_string(i) + " loss\n";
  const Tree first = {{"base.pt", {base, 0644}},
                      {"rng.bin", {RandomBytes(70000, 2), 0600}},  // codec none
                      {"log/train.txt", {text, 0644}},             // codec zstd
                      {"empty", {"", 0644}}};
  Tree second = first;
  second["rng.bin"] = {RandomBytes(70000, 3), 0600};
  second["log/train.txt"] = {text + "more\n", 0644};
  ASSERT_TRUE(Snapshot(first).ok());
  auto r = Snapshot(second);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_GT(r->reused_bytes, kFrameSize / 2) << "the base is referenced, not uploaded";
  const ManifestFile& b = r->manifest.files.at(0);
  ASSERT_EQ(b.path, "base.pt");
  ASSERT_NE(b.codec, Codec::kNone);
  ASSERT_NE(b.codec, Codec::kZstd) << "the weights are to test the un-shuffling too";
  EXPECT_NE(b.frames[0].key, b.key);

  auto latest = ByHand(dir_.Join("out2"), "");
  ASSERT_EQ(latest.exit_code, 0) << latest.err;
  EXPECT_EQ(ReadTree(dir_.Join("out2")), second);
  auto older = ByHand(dir_.Join("out1"), "1");
  ASSERT_EQ(older.exit_code, 0) << older.err;
  EXPECT_EQ(ReadTree(dir_.Join("out1")), first);
}

}  // namespace
}  // namespace sg::testing
