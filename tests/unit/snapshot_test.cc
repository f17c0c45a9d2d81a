// The snapshot data path on the file:// store: format, codecs, commit,
// restore with fallback, crashes and retention. tests/s3 repeats the round
// trips on a real S3 server.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "agent/repo/manifest.h"
#include "agent/repo/restorer.h"
#include "agent/repo/retention.h"
#include "agent/repo/snapshot_file_reader.h"
#include "agent/repo/snapshot_writer.h"
#include "agent/repo/store_layout.h"
#include "common/file_store.h"
#include "common/files.h"
#include "tests/support/fake_clock.h"
#include "tests/support/faulty_store.h"
#include "tests/support/file_store_fixture.h"
#include "tests/support/random_bytes.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

class SnapshotTest : public FileStoreTest {
 protected:
  // Writes with `writer` every file below `root`, read where it is.
  StatusOr<SnapshotResult> WriteTreeAt(SnapshotWriter& writer, const SnapshotRequest& req,
                                       const std::string& root, std::string resume = ".") {
    SG_ASSIGN_OR_RETURN(CapturedCheckpoint capture, CaptureTree(root, std::nullopt, resume));
    return writer.Write(capture, req);
  }

  // Snapshots the tree as it is now; returns the seq.
  uint64_t Snapshot(const Tree& tree, ObjectStore* store = nullptr, std::string resume = "") {
    const std::string src = dir_.Join("src-" + std::to_string(++sources_));
    WriteTree(src, tree);
    SnapshotRequest req;
    req.job = "job";
    req.preset = "generic";
    SnapshotWriter writer(store ? *store : *store_, clock_, SnapshotOptions{});
    auto r = WriteTreeAt(writer, req, src, resume.empty() ? "." : resume);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->seq : 0;
  }

  StatusOr<RestoreResult> Restore(const std::string& to, std::optional<uint64_t> seq = {}) {
    Restorer restorer(*store_, RestoreOptions{});
    return restorer.Restore("job", dir_.Join(to), seq);
  }
};

TEST_F(SnapshotTest, ManySmallFilesAndABigOneRoundTripByteIdentical) {
  Tree tree;
  for (int i = 0; i < 60; ++i) {
    tree["shards/part-" + std::to_string(i) + ".bin"] = {RandomBytes(100 + i * 37, i), 0644};
  }
  tree["model.pt"] = {Float32Weights(5'000'000, 1), 0600};  // 20 MB: three frames
  tree["notes/readme.txt"] = {std::string(10'000, 'a'), 0640};
  tree["empty"] = {"", 0644};
  tree["run.sh"] = {"#!/bin/sh\n", 0755};
  const uint64_t seq = Snapshot(tree);
  ASSERT_EQ(seq, 1u);
  auto r = Restore("out");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, 1u);
  EXPECT_EQ(ReadTree(dir_.Join("out")), tree);
}

TEST_F(SnapshotTest, TheLayoutIsTheDocumentedOne) {
  const uint64_t seq = Snapshot({{"a/b.txt", {std::string(5000, 'x'), 0644}}});
  const std::string base = dir_.Join("store/job/snapshots/0000000001/");
  EXPECT_TRUE(std::filesystem::exists(base + "manifest.json"));
  EXPECT_TRUE(std::filesystem::exists(base + "files/a/b.txt.zst"));
  EXPECT_EQ(*ReadFileToString(dir_.Join("store/job/latest")), "0000000001\n");
  auto manifest = ParseManifest(*ReadFileToString(base + "manifest.json"), "job", seq);
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  ASSERT_EQ(manifest->files.size(), 1u);
  const ManifestFile& f = manifest->files[0];
  EXPECT_EQ(f.path, "a/b.txt");
  EXPECT_EQ(f.size, 5000u);
  EXPECT_EQ(f.codec, Codec::kZstd);
  EXPECT_EQ(f.key, "snapshots/0000000001/files/a/b.txt.zst");
  EXPECT_EQ(f.frames.size(), 1u);
  EXPECT_EQ(f.stored_size, std::filesystem::file_size(base + "files/a/b.txt.zst"));
}

TEST_F(SnapshotTest, EachFileGetsTheCodecThatSuitsIt) {
  Snapshot({{"weights.f32", {Float32Weights(1'000'000, 2), 0644}},
            {"noise.bin", {RandomBytes(1 << 20, 3), 0644}},
            {"log.txt", {std::string(1 << 20, 'z'), 0644}}});
  Restorer restorer(*store_, RestoreOptions{});
  SnapshotCatalog catalog(*store_, "job");
  auto m = catalog.ReadManifest(1);
  ASSERT_TRUE(m.ok());
  std::map<std::string, Codec> codecs;
  for (const auto& f : m->files) codecs[f.path] = f.codec;
  EXPECT_EQ(codecs["weights.f32"], Codec::kZstdShuffle4);
  EXPECT_EQ(codecs["noise.bin"], Codec::kNone);
  EXPECT_EQ(codecs["log.txt"], Codec::kZstd);
}

TEST_F(SnapshotTest, RestoreAddsTheSnapshotAndKeepsWhatWasThere) {
  Snapshot({{"new.pt", {"new", 0644}}});
  WriteTree(dir_.Join("ckpt"), {{"old.pt", {"old", 0644}}, {"stale/x", {"x", 0644}}});
  auto r = Restore("ckpt");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Files restore did not put there are never its to delete (restore_rule_test.cc).
  EXPECT_EQ(ReadTree(dir_.Join("ckpt")),
            (Tree{{"new.pt", {"new", 0644}}, {"old.pt", {"old", 0644}}, {"stale/x", {"x", 0644}}}));
  // No temporary directory is left beside the target.
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_EQ(e.path().filename().string().find("spotguard-restore"), std::string::npos)
        << e.path();
  }
}

TEST_F(SnapshotTest, ResumePathPointsIntoTheRestoredDirectory) {
  Snapshot({{"ckpt/step_100.pt", {"w", 0644}}}, nullptr, "ckpt/step_100.pt");
  auto r = Restore("out");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->resume_path, dir_.Join("out/ckpt/step_100.pt"));
}

TEST_F(SnapshotTest, RestoreFallsBackWhenNewestSnapshotIsCorrupt) {
  Snapshot({{"model.pt", {"version one", 0644}}});
  Snapshot({{"model.pt", {"version two", 0644}}, {"opt.pt", {std::string(4096, 'o'), 0644}}});
  // Damage one byte of one stored object of the newest snapshot.
  const std::string victim = dir_.Join("store/job/snapshots/0000000002/files/opt.pt.zst");
  std::string bytes = *ReadFileToString(victim);
  bytes[bytes.size() / 2] ^= 0x55;
  ASSERT_TRUE(WriteFileAtomic(victim, bytes).ok());

  auto r = Restore("out");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, 1u);
  EXPECT_EQ(ReadTree(dir_.Join("out")), (Tree{{"model.pt", {"version one", 0644}}}));
  ASSERT_EQ(r->rejected.size(), 1u);
  EXPECT_NE(r->rejected[0].find("0000000002"), std::string::npos) << r->rejected[0];
  EXPECT_NE(r->rejected[0].find("opt.pt"), std::string::npos) << "names the bad file";
}

TEST_F(SnapshotTest, ATruncatedObjectIsCaughtToo) {
  Snapshot({{"a", {"first", 0644}}});
  Snapshot({{"a", {RandomBytes(3 << 20, 1), 0644}}});
  const std::string victim = dir_.Join("store/job/snapshots/0000000002/files/a");
  std::filesystem::resize_file(victim, 1000);
  auto r = Restore("out");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, 1u);
}

TEST_F(SnapshotTest, AManifestThatClimbsOutIsRefused) {
  Snapshot({{"good", {"good", 0644}}});
  const uint64_t bad = Snapshot({{"evil", {"evil", 0644}}});
  const std::string path = dir_.Join("store/job/snapshots/" + SeqName(bad) + "/manifest.json");
  std::string text = *ReadFileToString(path);
  const size_t at = text.find("\"path\": \"evil\"");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 14, "\"path\": \"../../escaped\"");
  ASSERT_TRUE(WriteFileAtomic(path, text).ok());

  EXPECT_FALSE(ParseManifest(text, "job", bad).ok());
  auto r = Restore("out/inner");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, 1u);
  EXPECT_NE(r->rejected.at(0).find("climbs out"), std::string::npos) << r->rejected[0];
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("escaped")));
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("out/escaped")));
}

TEST_F(SnapshotTest, TheEnginesIndexAndAttemptRoundTripAndAreOptional) {
  const uint64_t seq = Snapshot({{"good", {"good", 0644}}});
  const std::string plain =
      *ReadFileToString(dir_.Join("store/job/snapshots/" + SeqName(seq) + "/manifest.json"));
  EXPECT_EQ(plain.find("\"index\""), std::string::npos) << "no new keys outside an engine";
  auto parsed = ParseManifest(plain, "job", seq);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_FALSE(parsed->index.has_value());
  Manifest m = *parsed;
  m.index = 7;
  m.attempt = 2;
  parsed = ParseManifest(ManifestToJson(m).dump(), "job", seq);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->index, 7);
  EXPECT_EQ(parsed->attempt, 2);
  // Shown, never acted on: another shape is ignored, not a corrupt manifest.
  nlohmann::ordered_json odd = ManifestToJson(m);
  odd["index"] = "seven";
  parsed = ParseManifest(odd.dump(), "job", seq);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_FALSE(parsed->index.has_value());
}

TEST_F(SnapshotTest, ManifestPathRulesAreStrict) {
  for (const char* bad : {"/etc/passwd", "../x", "a/../../x", "a//b", "./a", ""}) {
    EXPECT_FALSE(CheckRelativePath(bad).ok()) << bad;
  }
  EXPECT_TRUE(CheckRelativePath("a/b.c/d..e").ok());
}

// The writer of a file's own object is told the file's size, which an
// s3:// store sizes its parts by (S3's 10,000-part limit).
TEST_F(SnapshotTest, EachFilesObjectWriterIsToldTheFilesSize) {
  FaultyStore faulty(*store_);
  const uint64_t size = 3 * kFrameSize + 5;
  WriteTree(dir_.Join("src"), {{"model.pt", {RandomBytes(size, 9), 0644}}});
  SnapshotRequest req;
  req.job = "job";
  SnapshotWriter writer(faulty, clock_, SnapshotOptions{});
  ASSERT_TRUE(WriteTreeAt(writer, req, dir_.Join("src")).ok());
  uint64_t told = 0;
  for (const auto& [key, hint] : faulty.writer_size_hints()) {
    if (key.find("model.pt") != std::string::npos) told = hint;
  }
  EXPECT_EQ(told, size);
}

TEST_F(SnapshotTest, ACrashBetweenObjectsAndManifestLeavesThePreviousSnapshot) {
  Snapshot({{"model.pt", {"committed", 0644}}});
  FaultyStore faulty(*store_);
  faulty.FailPutOf("manifest.json", /*die=*/true);
  SnapshotRequest req;
  WriteTree(dir_.Join("next"), {{"model.pt", {RandomBytes(1 << 20, 5), 0644}}});
  req.job = "job";
  SnapshotWriter writer(faulty, clock_, SnapshotOptions{});
  ASSERT_FALSE(WriteTreeAt(writer, req, dir_.Join("next")).ok());
  ASSERT_TRUE(faulty.dead());
  // The dead writer left its claim and objects behind.
  EXPECT_TRUE(std::filesystem::exists(dir_.Join("store/job/snapshots/0000000002/claim")));

  auto r = Restore("out");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, 1u);
  EXPECT_EQ(ReadTree(dir_.Join("out")), (Tree{{"model.pt", {"committed", 0644}}}));

  // gc leaves a young abandoned snapshot to its possibly live writer, and
  // removes it once it is old.
  auto young = CollectGarbage(*store_, clock_, "job", GcOptions{3, std::chrono::hours(1)});
  ASSERT_TRUE(young.ok());
  EXPECT_TRUE(young->abandoned.empty());
  clock_.Advance(std::chrono::hours(2));
  auto old = CollectGarbage(*store_, clock_, "job", GcOptions{3, std::chrono::hours(1)});
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->abandoned, std::vector<uint64_t>{2});
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("store/job/snapshots/0000000002")));
  EXPECT_TRUE(Restore("again").ok());
}

TEST_F(SnapshotTest, AFailedSnapshotTakesBackWhatItUploaded) {
  Snapshot({{"a", {"one", 0644}}});
  FaultyStore faulty(*store_);
  faulty.FailPutOf("manifest.json", /*die=*/false);
  SnapshotRequest req;
  WriteTree(dir_.Join("next"), {{"a", {"two", 0644}}});
  req.job = "job";
  SnapshotWriter writer(faulty, clock_, SnapshotOptions{});
  ASSERT_FALSE(WriteTreeAt(writer, req, dir_.Join("next")).ok());
  auto left = ListAll(*store_, SnapshotPrefix("job", 2));
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
}

TEST_F(SnapshotTest, AFileRewrittenWhileReadIsNeverCommitted) {
  const std::string src = dir_.Join("live");
  WriteTree(src, {{"model.pt", {RandomBytes(20 << 20, 8), 0644}}});
  FaultyStore faulty(*store_);
  // The trainer rewrites the file in place while its first frame uploads.
  faulty.OnFirstAppend("model.pt", [&] {
    std::ofstream(src + "/model.pt", std::ios::binary | std::ios::trunc) << "rewritten";
  });
  SnapshotRequest req;
  req.job = "job";
  SnapshotWriter writer(faulty, clock_, SnapshotOptions{});
  auto r = WriteTreeAt(writer, req, src);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "FileChanged") << r.status().ToString();
  SnapshotCatalog catalog(*store_, "job");
  EXPECT_TRUE(catalog.Committed()->empty());
  EXPECT_TRUE(Restore("out").status().Is(StatusCode::kNotFound));
}

TEST_F(SnapshotTest, AVerifyHookCanRefuseTheCommit) {
  const std::string src = dir_.Join("s");
  WriteTree(src, {{"a", {"x", 0644}}});
  SnapshotRequest req;
  req.job = "job";
  req.verify_before_commit = [] { return Status::Cancelled("capture changed"); };
  SnapshotWriter writer(*store_, clock_, SnapshotOptions{});
  EXPECT_FALSE(WriteTreeAt(writer, req, src).ok());
  EXPECT_TRUE(SnapshotCatalog(*store_, "job").Committed()->empty());
}

TEST_F(SnapshotTest, RetentionKeepsTheNewestAndDeletesManifestsFirst) {
  for (int i = 1; i <= 5; ++i) Snapshot({{"m", {"v" + std::to_string(i), 0644}}});
  auto r = CollectGarbage(*store_, clock_, "job", GcOptions{2, std::chrono::hours(1)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->deleted, (std::vector<uint64_t>{3, 2, 1}));
  EXPECT_EQ(*SnapshotCatalog(*store_, "job").Committed(), (std::vector<uint64_t>{5, 4}));
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("store/job/snapshots/0000000001")));
  auto restored = Restore("out");
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(ReadTree(dir_.Join("out")).at("m").content, "v5");
  EXPECT_FALSE(CollectGarbage(*store_, clock_, "job", GcOptions{0, {}}).ok());
}

TEST_F(SnapshotTest, RetentionNeverDeletesTheOnlyReadableSnapshot) {
  for (int i = 1; i <= 3; ++i) Snapshot({{"m", {"v" + std::to_string(i), 0644}}});
  ASSERT_TRUE(
      WriteFileAtomic(dir_.Join("store/job/snapshots/0000000003/manifest.json"), "{broken").ok());
  auto r = CollectGarbage(*store_, clock_, "job", GcOptions{1, std::chrono::hours(1)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->deleted.empty());
  auto restored = Restore("out");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->seq, 2u);
}

TEST_F(SnapshotTest, AStaleLatestIsOvertakenByANewerManifest) {
  Snapshot({{"m", {"one", 0644}}});
  Snapshot({{"m", {"two", 0644}}});
  // A crash after the manifest of 2 but before `latest` moved.
  ASSERT_TRUE(WriteFileAtomic(dir_.Join("store/job/latest"), "0000000001\n").ok());
  auto r = Restore("out");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->seq, 2u);
  ASSERT_TRUE(WriteFileAtomic(dir_.Join("store/job/latest"), "garbage").ok());
  auto g = Restore("out2");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->seq, 2u);
  std::filesystem::remove(dir_.Join("store/job/latest"));
  EXPECT_EQ(Restore("out3")->seq, 2u);
}

TEST_F(SnapshotTest, AChosenSnapshotIsRestoredWithoutFallback) {
  Snapshot({{"m", {"one", 0644}}});
  Snapshot({{"m", {"two", 0644}}});
  auto r = Restore("out", 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ReadTree(dir_.Join("out")).at("m").content, "one");
  EXPECT_TRUE(Restore("none", 7).status().Is(StatusCode::kNotFound));
}

TEST_F(SnapshotTest, AnEmptyStoreHasNothingToRestore) {
  auto r = Restore("out");
  EXPECT_TRUE(r.status().Is(StatusCode::kNotFound)) << r.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("out")));
}

TEST_F(SnapshotTest, RacingWritersNeverShareASeq) {
  const std::string src = dir_.Join("race");
  WriteTree(src, {{"f", {"x", 0644}}});
  std::vector<uint64_t> seqs(6);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seqs.size(); ++i) {
    threads.emplace_back([&, i] {
      SnapshotRequest req;
      req.job = "job";
      SnapshotWriter writer(*store_, clock_, SnapshotOptions{});
      auto r = WriteTreeAt(writer, req, src);
      seqs[i] = r.ok() ? r->seq : 0;
    });
  }
  for (auto& t : threads) t.join();
  std::sort(seqs.begin(), seqs.end());
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
}

TEST_F(SnapshotTest, VerifyNamesEveryDamagedFile) {
  Snapshot({{"a", {std::string(3000, 'a'), 0644}}, {"b", {std::string(3000, 'b'), 0644}}});
  for (const char* name : {"a.zst", "b.zst"}) {
    const std::string p = dir_.Join(std::string("store/job/snapshots/0000000001/files/") + name);
    std::string bytes = *ReadFileToString(p);
    bytes[bytes.size() - 3] ^= 1;
    ASSERT_TRUE(WriteFileAtomic(p, bytes).ok());
  }
  auto m = SnapshotCatalog(*store_, "job").ReadManifest(1);
  ASSERT_TRUE(m.ok());
  Status st = SnapshotFileReader(*store_, "job").Verify(*m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("\"a\""), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("\"b\""), std::string::npos) << st.message();
}

// Many small files go into a few pack objects (docs/format.md, "Packs"),
// restore byte for byte, and a damaged pack names the file whose bytes are
// bad and falls back to the previous snapshot.
TEST_F(SnapshotTest, ManySmallFilesArePackedAndADamagedPackNamesTheFile) {
  Tree tree;
  for (int i = 0; i < 40; ++i) {
    tree["tok/piece-" + std::to_string(i)] = {RandomBytes(200 + 97 * i, 50 + i), 0644};
  }
  tree["big.bin"] = {RandomBytes(3 << 20, 7), 0644};  // over the pack bound: its own object
  Snapshot({{"tok/piece-0", {"older", 0644}}});
  ASSERT_EQ(Snapshot(tree), 2u);
  int packs = 0, others = 0;
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(dir_.Join("store/job/snapshots/0000000002"))) {
    if (!e.is_regular_file()) continue;
    (e.path().string().find("/packs/") != std::string::npos ? packs : others)++;
  }
  EXPECT_EQ(packs, 1);
  EXPECT_EQ(others, 3) << "big.bin, the claim and the manifest";
  auto r = Restore("out");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadTree(dir_.Join("out")), tree);

  auto m = SnapshotCatalog(*store_, "job").ReadManifest(2);
  ASSERT_TRUE(m.ok());
  const FrameRef* victim = nullptr;
  for (const ManifestFile& f : m->files) {
    if (f.path == "tok/piece-17") victim = &f.frames.at(0);
  }
  ASSERT_NE(victim, nullptr);
  const std::string pack = dir_.Join("store/job/" + victim->key);
  std::string bytes = *ReadFileToString(pack);
  bytes[victim->offset + victim->stored / 2] ^= 0x20;
  ASSERT_TRUE(WriteFileAtomic(pack, bytes).ok());
  auto again = Restore("again");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->seq, 1u);
  ASSERT_EQ(again->rejected.size(), 1u);
  EXPECT_NE(again->rejected[0].find("tok/piece-17"), std::string::npos) << again->rejected[0];
}

// docs/format.md, "Memory": a ranged read decodes into at most its bound of
// raw bytes, however well the data compressed. Before, ranges were cut by
// stored bytes only, and 8 MiB of stored zeros was gigabytes in one read.
TEST(PlanReadRanges, BoundsTheRawBytesOfARangeAsWellAsTheStoredBytes) {
  constexpr uint64_t kMiB = 1 << 20;
  ManifestFile zeros;
  zeros.frame_size = 8 * kMiB;
  zeros.size = 1024 * zeros.frame_size;  // 8 GiB
  for (int i = 0; i < 1024; ++i) zeros.AppendOwnFrame(300);  // 300 stored bytes a frame
  const std::vector<ReadRange> ranges = PlanReadRanges(zeros, 8 * kMiB);
  ASSERT_EQ(ranges.size(), 1024u);
  uint64_t offset = 0;
  size_t frame = 0;
  for (const ReadRange& r : ranges) {
    EXPECT_LE(r.raw, 8 * kMiB);
    EXPECT_EQ(r.first_frame, frame);
    EXPECT_EQ(r.offset, offset);
    frame = r.end_frame;
    offset += r.stored;
  }
  EXPECT_EQ(frame, zeros.frames.size());
  EXPECT_EQ(offset, 1024u * 300u);

  // Small frames that compress well still go together up to the bound.
  ManifestFile mixed;
  mixed.frame_size = 1 * kMiB;
  mixed.size = 20 * kMiB + 5;
  for (int i = 0; i < 20; ++i) mixed.AppendOwnFrame(100 * 1024);
  mixed.AppendOwnFrame(5);
  const std::vector<ReadRange> small = PlanReadRanges(mixed, 8 * kMiB);
  ASSERT_EQ(small.size(), 3u);
  EXPECT_EQ(small[0].end_frame, 8u);
  EXPECT_EQ(small[0].raw, 8 * kMiB);
  EXPECT_EQ(small[2].end_frame, 21u);
  EXPECT_EQ(small[2].raw, 4 * kMiB + 5);
}

// A range is one ranged read: it never spans two objects, nor a gap inside one.
TEST(PlanReadRanges, NeverJoinsFramesOfDifferentObjectsOrWithAGap) {
  ManifestFile f;
  f.frame_size = 1024;
  f.size = 4 * 1024;
  f.frames = {FrameRef{"a", 0, 100, {}, {}}, FrameRef{"a", 100, 100, {}, {}}, FrameRef{"b", 200, 100, {}, {}},
              FrameRef{"b", 400, 100, {}, {}}};
  const std::vector<ReadRange> ranges = PlanReadRanges(f, 8 << 20);
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0].key, "a");
  EXPECT_EQ(ranges[0].end_frame, 2u);
  EXPECT_EQ(ranges[0].stored, 200u);
  EXPECT_EQ(ranges[1].key, "b");
  EXPECT_EQ(ranges[1].offset, 200u);
  EXPECT_EQ(ranges[1].end_frame, 3u);
  EXPECT_EQ(ranges[2].offset, 400u);
}

}  // namespace
}  // namespace sg::testing
