// Manifest formats (docs/format.md): the writer writes format 3 (every frame
// a reference with its raw SHA-256 and XXH3-128, no whole-file digest);
// format 2 and format 1 manifests still parse and restore; ParseManifest
// refuses references that point anywhere else than the job's own snapshots,
// or that do not add up.
#include <gtest/gtest.h>

#include "agent/repo/manifest.h"
#include "agent/repo/restorer.h"
#include "agent/repo/store_layout.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/xxh3.h"
#include "tests/support/file_store_fixture.h"
#include "tests/support/random_bytes.h"

namespace sg::testing {
namespace {

class ManifestFormatTest : public FileStoreTest {
 protected:
  std::string ManifestPath(uint64_t seq) {
    return dir_.Join("store/job/snapshots/" + SeqName(seq) + "/manifest.json");
  }
  nlohmann::json ReadJson(uint64_t seq) {
    return nlohmann::json::parse(*ReadFileToString(ManifestPath(seq)));
  }
  // Rewrites the manifest of `seq` as format 2 wrote it: each file with the
  // SHA-256 of its bytes in `tree`.
  nlohmann::json AsFormat2(uint64_t seq, const Tree& tree) {
    nlohmann::json j = ReadJson(seq);
    j["format"] = "spotguard-snapshot/2";
    for (nlohmann::json& f : j["files"]) {
      f["sha256"] = Sha256Hex(tree.at(f["path"].get<std::string>()).content);
    }
    EXPECT_TRUE(WriteFileAtomic(ManifestPath(seq), j.dump(1)).ok());
    return j;
  }
  // Parses `j` as the manifest of `seq`; the error message, "" when it parses.
  std::string Refusal(const nlohmann::json& j, uint64_t seq) {
    auto m = ParseManifest(j.dump(), "job", seq);
    return m.ok() ? "" : m.status().message();
  }
};

TEST_F(ManifestFormatTest, TheWriterWritesFormat3WithEveryFramesDigestsAndNoFileDigest) {
  const std::string big = RandomBytes(kFrameSize + 1000, 3);
  auto r = CommitTree({{"big", {big, 0644}}, {"small", {"tiny", 0644}}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const nlohmann::json j = ReadJson(r->seq);
  EXPECT_EQ(j["format"], "spotguard-snapshot/3");
  EXPECT_FALSE(j["files"][0].contains("sha256")) << j["files"][0];
  EXPECT_FALSE(j["files"][1].contains("sha256")) << j["files"][1];
  const nlohmann::json& frames = j["files"][0]["frames"];
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_FALSE(frames[0].contains("key")) << "the file's own object is implied";
  EXPECT_EQ(frames[0]["offset"], 0u);
  EXPECT_EQ(frames[1]["offset"], frames[0]["stored"]);
  EXPECT_EQ(frames[0]["sha256"], Sha256Hex(std::string_view(big).substr(0, kFrameSize)));
  EXPECT_EQ(frames[1]["sha256"], Sha256Hex(std::string_view(big).substr(kFrameSize)));
  EXPECT_EQ(frames[0]["xxh3"], Xxh3Hex(std::string_view(big).substr(0, kFrameSize)));
  EXPECT_EQ(frames[1]["xxh3"], Xxh3Hex(std::string_view(big).substr(kFrameSize)));
  EXPECT_EQ(j["files"][1]["frames"][0]["xxh3"], Xxh3Hex("tiny"));
  auto m = ParseManifest(j.dump(), "job", r->seq);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format, 3);
  EXPECT_TRUE(m->files[0].sha256.empty());
  EXPECT_EQ(m->files[0].frames[1].xxh3, Xxh3Hex(std::string_view(big).substr(kFrameSize)));
  EXPECT_EQ(m->files[0].frames[1].key, m->files[0].key);
  EXPECT_EQ(m->NewStored(), m->TotalStored());
  EXPECT_EQ(m->ReusedStored(), 0u);
}

TEST_F(ManifestFormatTest, AFormat1ManifestStillParsesAndRestores) {
  const Tree tree = {{"big", {RandomBytes(kFrameSize * 2 + 77, 4), 0644}},
                     {"dir/small", {"small file", 0600}},
                     {"empty", {"", 0644}}};
  auto r = CommitTree(tree);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Rewrite the manifest as a format 1 writer wrote it: stored sizes only,
  // and each file's SHA-256.
  nlohmann::json j = AsFormat2(r->seq, tree);
  j["format"] = "spotguard-snapshot/1";
  for (nlohmann::json& f : j["files"]) {
    nlohmann::json sizes = nlohmann::json::array();
    for (const nlohmann::json& fr : f["frames"]) sizes.push_back(fr["stored"]);
    f["frames"] = sizes;
  }
  ASSERT_TRUE(WriteFileAtomic(ManifestPath(r->seq), j.dump(1)).ok());
  auto m = ParseManifest(j.dump(), "job", r->seq);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format, 1);
  EXPECT_EQ(ManifestToJson(*m)["format"], "spotguard-snapshot/1") << "round trips as format 1";

  Restorer restorer(*store_, RestoreOptions{});
  auto restored = restorer.Restore("job", dir_.Join("out"), std::nullopt);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->seq, r->seq);
  EXPECT_TRUE(restored->rejected.empty());
  EXPECT_EQ(ReadTree(dir_.Join("out")), tree);
}

// A format 2 manifest (spotguard before 2026-11-30: each file's SHA-256
// beside its frames') parses, restores, round trips as format 2, and still
// needs its file digests.
TEST_F(ManifestFormatTest, AFormat2ManifestStillParsesRestoresAndKeepsItsFileDigests) {
  const Tree tree = {{"big", {RandomBytes(kFrameSize * 2 + 9, 13), 0644}},
                     {"small", {"small file", 0600}},
                     {"empty", {"", 0644}}};
  auto r = CommitTree(tree);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const nlohmann::json j = AsFormat2(r->seq, tree);
  auto m = ParseManifest(j.dump(), "job", r->seq);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format, 2);
  EXPECT_EQ(m->files[0].sha256, Sha256Hex(tree.at("big").content));
  const nlohmann::ordered_json again = ManifestToJson(*m);
  EXPECT_EQ(again["format"], "spotguard-snapshot/2");
  EXPECT_EQ(again["files"][0]["sha256"], j["files"][0]["sha256"]);
  auto restored = Restorer(*store_, RestoreOptions{}).Restore("job", dir_.Join("out"), r->seq);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(ReadTree(dir_.Join("out")), tree);

  nlohmann::json no_file_sha = j;
  no_file_sha["files"][0].erase("sha256");
  EXPECT_NE(Refusal(no_file_sha, r->seq).find("missing or mistyped"), std::string::npos);
  nlohmann::json bad_file_sha = j;
  bad_file_sha["files"][0]["sha256"] = "abc";
  EXPECT_NE(Refusal(bad_file_sha, r->seq).find("malformed sha256"), std::string::npos);
  // A file of one frame whose two digests disagree: the manifest contradicts itself.
  nlohmann::json contradicts = j;
  contradicts["files"][1]["sha256"] = Sha256Hex("another small file");
  ASSERT_TRUE(WriteFileAtomic(ManifestPath(r->seq), contradicts.dump(1)).ok());
  auto refused = Restorer(*store_, RestoreOptions{}).Restore("job", dir_.Join("again"), r->seq);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("SHA-256 does not match"), std::string::npos)
      << refused.status().message();
}

TEST_F(ManifestFormatTest, ReferencesToAnEarlierSnapshotOrAPackParse) {
  auto r = CommitTree({{"a", {RandomBytes(1000, 5), 0644}}});
  ASSERT_TRUE(r.ok());
  nlohmann::json j = ReadJson(r->seq);
  j["seq"] = 9;
  j["files"][0]["key"] = "snapshots/0000000009/files/a.zst";
  j["files"][0]["frames"][0]["key"] = "snapshots/0000000001/files/a.zst";
  auto m = ParseManifest(j.dump(), "job", 9);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->files[0].frames[0].key, "snapshots/0000000001/files/a.zst");
  EXPECT_EQ(m->NewStored(), 0u);
  EXPECT_EQ(m->ReusedStored(), m->TotalStored());
  EXPECT_EQ(m->ReferencedKeys(), std::vector<std::string>{"snapshots/0000000001/files/a.zst"});
  // It round trips with the key written out.
  auto again = ParseManifest(ManifestToJson(*m).dump(), "job", 9);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->files[0].frames, m->files[0].frames);

  j["files"][0]["frames"][0]["key"] = "snapshots/0000000009/packs/0001";
  EXPECT_EQ(Refusal(j, 9), "");
}

// A format 2 manifest written before frames carried "xxh3" (spotguard up to
// 2026-11-27) parses and restores byte for byte: each frame is then checked
// against its SHA-256, and a damaged one is still caught.
TEST_F(ManifestFormatTest, AFormat2ManifestWithoutXxh3StillRestoresAndIsChecked) {
  const std::string big = RandomBytes(kFrameSize * 2 + 5, 8);
  const Tree tree = {{"big", {big, 0644}}, {"small", {"small file", 0600}}};
  auto r = CommitTree(tree);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  nlohmann::json j = AsFormat2(r->seq, tree);
  for (auto& f : j["files"]) {
    for (auto& frame : f["frames"]) {
      ASSERT_TRUE(frame.contains("xxh3"));
      frame.erase("xxh3");
    }
  }
  ASSERT_TRUE(WriteFileAtomic(ManifestPath(r->seq), j.dump(1)).ok());
  auto m = ParseManifest(j.dump(), "job", r->seq);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->files[0].frames[0].xxh3.empty());
  const std::string to = dir_.Join("restored");
  auto restored = Restorer(*store_, RestoreOptions{}).Restore("job", to, r->seq);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(*ReadFileToString(to + "/big"), big);
  EXPECT_EQ(*ReadFileToString(to + "/small"), "small file");

  // Frame 1's stored bytes replaced by frame 0's: every size still fits, and
  // only its SHA-256 tells.
  const std::string object = dir_.Join("store/job/") + m->files[0].key;
  std::string stored = *ReadFileToString(object);
  const FrameRef& f0 = m->files[0].frames[0];
  const FrameRef& f1 = m->files[0].frames[1];
  ASSERT_EQ(f0.stored, f1.stored) << "random bytes are stored raw, frames of equal size";
  stored.replace(f1.offset, f1.stored, stored.substr(f0.offset, f0.stored));
  ASSERT_TRUE(WriteFileAtomic(object, stored).ok());
  auto damaged = Restorer(*store_, RestoreOptions{}).Restore("job", dir_.Join("again"), r->seq);
  ASSERT_FALSE(damaged.ok());
  EXPECT_NE(damaged.status().message().find("\"big\""), std::string::npos)
      << damaged.status().message();
  EXPECT_NE(damaged.status().message().find("SHA-256 does not match"), std::string::npos)
      << damaged.status().message();
}

TEST_F(ManifestFormatTest, BadReferencesAreRefusedWithTheReason) {
  auto r = CommitTree({{"a", {RandomBytes(1000, 6), 0644}}});
  ASSERT_TRUE(r.ok());
  const nlohmann::json good = ReadJson(r->seq);
  ASSERT_EQ(Refusal(good, r->seq), "");
  auto with_frame = [&](const char* field, const nlohmann::json& value) {
    nlohmann::json j = good;
    j["files"][0]["frames"][0][field] = value;
    return Refusal(j, r->seq);
  };
  for (const char* key : {"snapshots/0000000002/files/a.zst",  // a later snapshot
                          "../other-job/snapshots/0000000001/files/a.zst", "lease",
                          "snapshots/0000000001/manifest.json", "snapshots/0000000001/claim",
                          "snapshots/1/files/a.zst", "snapshots/0000000001/files/../../x",
                          "/snapshots/0000000001/files/a.zst"}) {
    EXPECT_NE(with_frame("key", key).find("points outside the job's snapshots"), std::string::npos)
        << key << ": " << with_frame("key", key);
  }
  EXPECT_NE(with_frame("offset", UINT64_MAX).find("has offset"), std::string::npos);
  EXPECT_NE(with_frame("offset", -1).find("whole number"), std::string::npos);
  EXPECT_NE(with_frame("sha256", "abc").find("malformed sha256"), std::string::npos);
  EXPECT_NE(with_frame("xxh3", "abc").find("malformed xxh3"), std::string::npos);
  EXPECT_NE(with_frame("xxh3", std::string(32, 'A')).find("malformed xxh3"), std::string::npos);
  EXPECT_NE(with_frame("xxh3", 7).find("missing or mistyped"), std::string::npos);
  EXPECT_NE(with_frame("stored", 0).find("has offset"), std::string::npos)
      << with_frame("stored", 0);
  EXPECT_NE(with_frame("stored", 1).find("do not add up"), std::string::npos);
  nlohmann::json no_sha = good;
  no_sha["files"][0]["frames"][0].erase("sha256");
  EXPECT_NE(Refusal(no_sha, r->seq).find("missing or mistyped"), std::string::npos);
  nlohmann::json number = good;
  number["files"][0]["frames"][0] = 12;  // a format 1 frame in a format 3 manifest
  EXPECT_NE(Refusal(number, r->seq).find("not an object"), std::string::npos);
  nlohmann::json format4 = good;
  format4["format"] = "spotguard-snapshot/4";
  EXPECT_NE(Refusal(format4, r->seq).find("format is not"), std::string::npos);
}

}  // namespace
}  // namespace sg::testing
