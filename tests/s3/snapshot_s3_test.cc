// Snapshots on a real S3 server: round trips of many small files and of a
// 1 GiB file, a zstd object that the stock tools (`aws s3 cp`, `zstd -d`)
// restore without spotguard, and a snapshot of references that
// scripts/restore-by-hand.sh restores.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "agent/repo/manifest.h"
#include "agent/repo/restorer.h"
#include "agent/repo/retention.h"
#include "agent/repo/snapshot_writer.h"
#include "common/crypto.h"
#include "common/files.h"
#include "tests/e2e/e2e_base.h"
#include "tests/support/big_file.h"
#include "tests/support/capture_in_place.h"
#include "tests/support/fake_clock.h"
#include "tests/support/random_bytes.h"
#include "tests/support/reuse_support.h"
#include "tests/support/s3_test_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"
#include "tests/support/manifest_bytes.h"

namespace sg::testing {
namespace {

class S3Snapshots : public E2EBase {
 protected:
  void SetUp() override { UseS3("snapshot-tests"); }
  void TearDown() override {
    if (!store_) return;
    auto all = ListAll(*store_, "");
    if (!all.ok()) return;
    std::vector<std::string> keys;
    for (const auto& o : *all) keys.push_back(s3_store_->FullKey(o.key));
    for (size_t i = 0; i < keys.size(); i += 1000) {
      std::vector<std::string> batch(keys.begin() + i,
                                     keys.begin() + std::min(keys.size(), i + 1000));
      (void)s3_store_->client().DeleteObjects(s3_.bucket, batch);
    }
  }
  StatusOr<SnapshotResult> Snapshot(const std::string& root) {
    SnapshotRequest req;
    req.job = "job";
    SG_ASSIGN_OR_RETURN(CapturedCheckpoint capture, CaptureTree(root));
    SnapshotWriter writer(*store_, clock_, SnapshotOptions{});
    return writer.Write(capture, req);
  }

  // scripts/restore-by-hand.sh into `out`; `seq` "" = the one `latest` names.
  CommandResult ByHand(const std::string& out, const std::string& seq) {
    std::map<std::string, std::string> env = s3_.AwsEnv();
    env["AWS_ARGS"] = "--endpoint-url " + s3_.endpoint;
    std::vector<std::string> argv = {
        std::string(SPOTGUARD_SOURCE_DIR) + "/scripts/restore-by-hand.sh",
        "s3://" + s3_.bucket + "/" + prefix_, "job", out};
    if (!seq.empty()) argv.push_back(seq);
    return RunCommand(argv, env, std::chrono::seconds(240));
  }
  // The environment of an `aws` command against the test gateway ($EP), plus `extra`.
  std::map<std::string, std::string> AwsCliEnv(std::map<std::string, std::string> extra) const {
    extra.insert({{"EP", s3_.endpoint},
                  {"AWS_ACCESS_KEY_ID", s3_.access_key},
                  {"AWS_SECRET_ACCESS_KEY", s3_.secret_key},
                  {"AWS_DEFAULT_REGION", s3_.region},
                  {"AWS_EC2_METADATA_DISABLED", "true"}});
    return extra;
  }

  FakeClock clock_;
};

TEST_F(S3Snapshots, ManySmallFilesRoundTripByteIdentical) {
  Tree tree;
  std::mt19937 rng(3);
  for (int i = 0; i < 150; ++i) {
    std::string content(static_cast<size_t>(rng() % 20000), '\0');
    for (char& c : content) c = static_cast<char>('a' + rng() % 4);
    tree["layer" + std::to_string(i % 7) + "/shard-" + std::to_string(i) + ".bin"] = {
        content, i % 3 == 0 ? 0600u : 0644u};
  }
  tree["trainer_state.json"] = {R"({"global_step": 1200})", 0644};
  WriteTree(dir_.Join("src"), tree);
  auto r = Snapshot(dir_.Join("src"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Restorer restorer(*store_, RestoreOptions{});
  auto back = restorer.Restore("job", dir_.Join("out"), std::nullopt);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->seq, r->seq);
  EXPECT_EQ(ReadTree(dir_.Join("out")), tree);
}

TEST_F(S3Snapshots, AOneGiBFileRoundTripsByteIdentical) {
  const FileDigest want = WriteWeightsFile(dir_.Join("src/model.pt"), 1024);
  auto r = Snapshot(dir_.Join("src"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->manifest.files.size(), 1u);
  EXPECT_EQ(r->manifest.files[0].size, want.size);
  EXPECT_EQ(r->manifest.files[0].frames.size(), 128u);
  EXPECT_LT(r->stored_bytes, r->bytes);
  std::filesystem::remove_all(dir_.Join("src"));

  Restorer restorer(*store_, RestoreOptions{});
  auto back = restorer.Restore("job", dir_.Join("out"), std::nullopt);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(DigestOf(dir_.Join("out/model.pt")), want);
}

TEST_F(S3Snapshots, AZstdObjectRestoresWithAwsCliAndZstd) {
  std::string text;
  for (int i = 0; i < 400000; ++i)
    text += "step " + std::to_string(i) + " loss 0.0" + std::to_string(i % 97) + "\n";
  WriteTree(dir_.Join("src"), {{"logs/train.log", {text, 0644}}});
  auto r = Snapshot(dir_.Join("src"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ManifestFile& f = r->manifest.files.at(0);
  ASSERT_EQ(f.codec, Codec::kZstd);
  ASSERT_GT(f.frames.size(), 1u) << "several frames, so the concatenation is what is tested";
  const std::string url = "s3://" + s3_.bucket + "/" + prefix_ + "/job/" + f.key;
  const std::string out = dir_.Join("plain.log");
  auto cmd = RunCommand(
      {"bash", "-c",
       "set -o pipefail; aws --endpoint-url \"$EP\" s3 cp \"$URL\" - | zstd -d -q -o \"$OUT\""},
      AwsCliEnv({{"URL", url}, {"OUT", out}}),
      std::chrono::seconds(120));
  ASSERT_EQ(cmd.exit_code, 0) << cmd.err;
  auto plain = ReadFileToString(out);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, text);
  EXPECT_TRUE(HoldsManifestBytes(*plain, f));
  // docs/format.md, "Frame digests": the restored file checked frame by
  // frame with split and sha256sum.
  auto frames = RunCommand(
      {"bash", "-c", "split -b \"$FS\" --filter='sha256sum' \"$OUT\" | cut -d' ' -f1"},
      {{"FS", std::to_string(f.frame_size)}, {"OUT", out}}, std::chrono::seconds(60));
  ASSERT_EQ(frames.exit_code, 0) << frames.err;
  std::string want;
  for (const FrameRef& frame : f.frames) want += frame.sha256 + "\n";
  EXPECT_EQ(frames.out, want);
}

// docs/format.md, "Restoring without spotguard": scripts/restore-by-hand.sh
// (ranged GETs with the AWS CLI, jq, zstd) restores a snapshot whose frames
// are partly references into an earlier snapshot's objects, in every codec.
TEST_F(S3Snapshots, ASnapshotOfReferencesRestoresByHandWithAwsCliJqAndZstd) {
  const std::string base = Float32Weights((kFrameSize + 4096) / 4, 1);  // 2 frames, shuffled
  std::string text;
  for (int i = 0; i < 3000; ++i) text += "step " + std::to_string(i) + " loss\n";
  const Tree first = {{"base.pt", {base, 0644}},
                      {"rng.bin", {RandomBytes(70000, 2), 0600}},  // codec none
                      {"log/train.txt", {text, 0644}},             // codec zstd
                      {"empty", {"", 0644}}};
  Tree second = first;
  second["rng.bin"] = {RandomBytes(70000, 3), 0600};
  second["log/train.txt"] = {text + "more\n", 0644};
  WriteTree(dir_.Join("first"), first);
  WriteTree(dir_.Join("second"), second);
  ASSERT_TRUE(Snapshot(dir_.Join("first")).ok());
  auto r = Snapshot(dir_.Join("second"));
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

// docs/format.md, "Packs": one file of a pack comes out with a ranged GET
// of its frame and `zstd -d`, as the recipe there says; and its frame's
// "xxh3" is what `xxh128sum` prints for the decoded bytes ("Frame digests").
TEST_F(S3Snapshots, APackedFileExtractsWithARangedGetAndZstd) {
  Tree tree;
  for (int i = 0; i < 20; ++i) {
    tree["cfg/part-" + std::to_string(i) + ".json"] = {
        "{\"part\": " + std::to_string(i) + ", \"pad\": \"" + std::string(500 + i * 41, 'p') + "\"}\n",
        0644};
  }
  WriteTree(dir_.Join("src"), tree);
  auto r = Snapshot(dir_.Join("src"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ManifestFile* f = nullptr;
  for (const ManifestFile& m : r->manifest.files) {
    if (m.path == "cfg/part-7.json") f = &m;
  }
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->frames.size(), 1u);
  const FrameRef& frame = f->frames[0];
  ASSERT_NE(frame.key.find("/packs/"), std::string::npos) << frame.key;
  ASSERT_GT(frame.offset, 0u) << "not the first file of its pack";
  const std::string out = dir_.Join("part-7.json");
  auto cmd = RunCommand(
      {"bash", "-c",
       "set -e; aws --endpoint-url \"$EP\" s3api get-object --bucket \"$BUCKET\" --key \"$KEY\" "
       "--range \"bytes=$FIRST-$LAST\" \"$OUT.zst\" > /dev/null && zstd -d -q \"$OUT.zst\" -o \"$OUT\" "
       "&& xxh128sum \"$OUT\""},
      AwsCliEnv({{"BUCKET", s3_.bucket},
                 {"KEY", prefix_ + "/job/" + frame.key},
                 {"FIRST", std::to_string(frame.offset)},
                 {"LAST", std::to_string(frame.offset + frame.stored - 1)},
                 {"OUT", out}}),
      std::chrono::seconds(120));
  ASSERT_EQ(cmd.exit_code, 0) << cmd.err;
  auto plain = ReadFileToString(out);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, tree["cfg/part-7.json"].content);
  EXPECT_EQ(Sha256Hex(*plain), frame.sha256);
  ASSERT_EQ(frame.xxh3.size(), 32u);
  EXPECT_EQ(cmd.out.substr(0, 33), frame.xxh3 + " ") << cmd.out;
}

// `gc --older-than 0s` in a loop on another thread while a writer uploads a
// file in parts (multipart) and references a base that only snapshot 1
// holds, which gc retires (keep 1): the writer's claim is live, so gc takes
// none of its objects or its upload in progress, and the snapshot commits
// with every reference there (docs/design.md §4, "Live writers"). The loop
// starts at the writer's first part, after its index was built; what it
// deletes before the writer is done is the interleaving's, not asserted.
TEST_F(S3Snapshots, GcInALoopDuringAMultipartUploadLeavesNoMissingReference) {
  const std::string base = RandomBytes(3 * kFrameSize, 21);
  const Tree first = {{"base.bin", {base, 0644}}, {"adapter.bin", {RandomBytes(1000, 22), 0644}}};
  const Tree third = {{"base.bin", {base, 0644}},
                      {"adapter.bin", {RandomBytes(24 << 20, 23), 0644}}};
  WriteTree(dir_.Join("first"), first);
  WriteTree(dir_.Join("second"), {{"other.bin", {RandomBytes(1000, 24), 0644}}});
  WriteTree(dir_.Join("third"), third);
  ASSERT_TRUE(Snapshot(dir_.Join("first")).ok());
  ASSERT_TRUE(Snapshot(dir_.Join("second")).ok());

  StepStore steps(*store_);
  std::atomic<bool> writing{true};
  std::atomic<int> gcs{0}, gc_failures{0};
  std::thread gc_loop;
  steps.BeforeStep([&](const StepStore::Op& op) {
    if (op.kind != StepStore::Kind::kAppend || steps.hooked()) return;
    steps.set_hooked();
    gc_loop = std::thread([&] {
      while (writing) {
        const GcOptions older_than_zero{1, std::chrono::seconds(0)};
        if (!CollectGarbage(*store_, SystemClock(), "job", older_than_zero).ok()) ++gc_failures;
        ++gcs;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // leave the gateway room
      }
    });
  });
  auto capture = CaptureTree(dir_.Join("third"));
  ASSERT_TRUE(capture.ok()) << capture.status().ToString();
  SnapshotRequest request;
  request.job = "job";
  auto written = SnapshotWriter(steps, SystemClock(), SnapshotOptions{}).Write(*capture, request);
  writing = false;
  if (gc_loop.joinable()) gc_loop.join();
  ASSERT_TRUE(steps.hooked()) << "the adapter went up in parts";
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_GT(gcs.load(), 0);
  EXPECT_EQ(gc_failures.load(), 0);
  EXPECT_EQ(CountMissingReferences(*store_, "job"), 0);
  // Once the writer is done, gc retires snapshot 1 and keeps its base.
  ASSERT_TRUE(CollectGarbage(*store_, SystemClock(), "job", {1, std::chrono::seconds(0)}).ok());
  EXPECT_EQ(CountMissingReferences(*store_, "job"), 0);
  Restorer restorer(*store_, RestoreOptions{});
  auto restored = restorer.Restore("job", dir_.Join("out"), std::nullopt);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->seq, written->seq);
  EXPECT_EQ(ReadTree(dir_.Join("out")), third);
}

}  // namespace
}  // namespace sg::testing
