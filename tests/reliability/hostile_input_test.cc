// Hostile input through the spotguard binary (issue #10 item 5): snapshots
// crafted in a file:// store the way agent/manifest.* and
// agent/snapshot_writer.* lay them out (docs/format.md) but with `..`,
// absolute paths, symlinks, huge sizes, wrong checksums, truncated, corrupt
// and oversized zstd frames; malformed IMDS bodies; invalid configs. Each
// gives a clear error with the documented exit code, and nothing is written
// outside the target: a sentinel sibling directory, the parent's listing and
// the previous checkpoint are compared before and after.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "agent/repo/manifest.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/zstd_codec.h"
#include "tests/support/reliability_record.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Every path below `root`, for "nothing new appeared anywhere".
std::set<std::string> Listing(const std::string& root) {
  std::set<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::end(it); it.increment(ec)) {
    out.insert(fs::relative(it->path(), root).string());
  }
  return out;
}

// Listing(root) without the store's quarantine entries: a damaged object is
// quarantined in the store by the read that finds it (docs/design.md §4,
// "Quarantine").
std::set<std::string> ListingButQuarantine(const std::string& root) {
  std::set<std::string> out = Listing(root);
  std::erase_if(out, [](const std::string& p) { return p.starts_with("store/job/quarantine"); });
  return out;
}

class HostileSnapshot : public ::testing::Test {
 public:
  // <tmp>/store                  the file:// store
  // <tmp>/work/ckpt              the previous checkpoint (restore target)
  // <tmp>/work/sentinel          a sibling that must never change
  // <tmp>/src                    what snapshot 1 is taken from
  void SetUp() override {
    WriteTree(dir_.Join("work/ckpt"), previous_);
    WriteTree(dir_.Join("work/sentinel"), sentinel_);
    WriteTree(dir_.Join("src"), source_);
  }

  CommandResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), SPOTGUARD_BIN);
    return RunCommand(args, {{"SPOTGUARD_JOB", "job"},
                             {"SPOTGUARD_STORE", "file://" + dir_.Join("store")},
                             {"SPOTGUARD_CONFIG", ""}});
  }

  std::string SnapshotDir() const { return dir_.Join("store/job/snapshots/0000000001"); }
  std::string ManifestPath() const { return SnapshotDir() + "/manifest.json"; }
  std::string ObjectPath(const std::string& rel) const { return SnapshotDir() + "/files/" + rel; }

  json ReadManifest() { return json::parse(*ReadFileToString(ManifestPath())); }
  void WriteManifest(const json& j) { WriteRaw(ManifestPath(), j.dump(2)); }
  void WriteRaw(const std::string& path, const std::string& bytes) {
    ASSERT_TRUE(WriteFileAtomic(path, bytes).ok()) << path;
  }

  // The file entry of `path` in manifest `j`.
  static json& Entry(json& j, const std::string& path) {
    for (json& f : j["files"]) {
      if (f["path"] == path) return f;
    }
    ADD_FAILURE() << "no " << path << " in the manifest";
    static json none;
    return none;
  }

  // Takes snapshot 1 of src with the real binary (the seed every case mutates).
  void TakeSnapshot() {
    auto snap = Run({"snapshot", "--dir", dir_.Join("src")});
    ASSERT_EQ(snap.exit_code, 0) << snap.err;
    ASSERT_TRUE(fs::exists(ManifestPath()));
  }

  // restore and verify both fail with `code`, name `what`, and leave
  // everything outside the store as it was.
  void ExpectRefused(const std::string& name, const std::string& what,
                     const std::string& verify_what, int code = 1) {
    SCOPED_TRACE(name);
    const auto parent_before = Listing(dir_.Join("work"));
    const auto outside_before = ListingButQuarantine(dir_.path());

    auto restore = Run({"restore", "--to", dir_.Join("work/ckpt")});
    auto verify = Run({"verify", "--snapshot", "1"});
    bool ok = true;
    auto check = [&](bool cond, const std::string& what_failed) {
      EXPECT_TRUE(cond) << what_failed;
      ok = ok && cond;
    };
    check(restore.exit_code == code,
          "restore exit " + std::to_string(restore.exit_code) + ": " + restore.err);
    check(restore.err.find(what) != std::string::npos, "restore said: " + restore.err);
    check(verify.exit_code == code,
          "verify exit " + std::to_string(verify.exit_code) + ": " + verify.err);
    check(verify.err.find(verify_what) != std::string::npos, "verify said: " + verify.err);
    // Nothing written outside the target, the target untouched, no leftovers.
    check(ReadTree(dir_.Join("work/ckpt")) == previous_, "the previous checkpoint changed");
    check(ReadTree(dir_.Join("work/sentinel")) == sentinel_, "the sentinel changed");
    check(Listing(dir_.Join("work")) == parent_before, "the parent's listing changed");
    check(ListingButQuarantine(dir_.path()) == outside_before,
          "something appeared or vanished outside");
    ++cases_;
    if (ok) ++refused_;
  }

  static std::string Sha256Hex(const std::string& bytes) { return HexEncode(Sha256(bytes)); }

  TempDir dir_;
  const Tree previous_ = {{"step_5.pt", {"the previous, good checkpoint", 0644}}};
  const Tree sentinel_ = {{"keep.txt", {"must never change", 0600}}};
  // model.pt: 3 frames of zstd; small.txt: one small frame.
  const Tree source_ = {{"model.pt", {std::string(20u << 20, 'w'), 0644}},
                        {"small.txt", {std::string(5000, 's'), 0644}}};
  int cases_ = 0;
  int refused_ = 0;
};

// Format 2 frames (docs/format.md) back to back in the file's own object.
json OwnFrames(const std::vector<uint64_t>& sizes, const std::string& sha256) {
  json frames = json::array();
  uint64_t offset = 0;
  for (uint64_t stored : sizes) {
    frames.push_back({{"offset", offset}, {"stored", stored}, {"sha256", sha256}});
    offset += stored;
  }
  return frames;
}

// Each mutation of snapshot 1, with what the error must name.
struct Mutation {
  std::string name;
  std::string what;  // a substring of the error
  std::function<void(HostileSnapshot&)> apply;
  std::string verify_what = "";  // what verify's error names, when not `what`
};

TEST_F(HostileSnapshot, CraftedSnapshotsAreRefusedAndNothingOutsideTheTargetChanges) {
  const std::string outside = dir_.Join("escaped");
  std::vector<Mutation> mutations = {
      {"path with ..", "climbs out",
       [](HostileSnapshot& t) {
         json j = t.ReadManifest();
         Entry(j, "small.txt")["path"] = "../sentinel/keep.txt";
         t.WriteManifest(j);
       }},
      {"path a/../../x", "climbs out",
       [](HostileSnapshot& t) {
         json j = t.ReadManifest();
         Entry(j, "small.txt")["path"] = "a/../../escaped";
         t.WriteManifest(j);
       }},
      {"absolute path", "is absolute",
       [outside](HostileSnapshot& t) {
         json j = t.ReadManifest();
         Entry(j, "small.txt")["path"] = outside;
         t.WriteManifest(j);
       }},
      {"resume with ..", "resume",
       [](HostileSnapshot& t) {
         json j = t.ReadManifest();
         j["resume"] = "../sentinel";
         t.WriteManifest(j);
       }},
      {"key outside the snapshot", "points outside the snapshot",
       [](HostileSnapshot& t) {
         json j = t.ReadManifest();
         Entry(j, "small.txt")["key"] = "snapshots/0000000001/files/../../../../latest";
         t.WriteManifest(j);
       }},
      {"size 2^62", "frames for",
       [](HostileSnapshot& t) {
         json j = t.ReadManifest();
         Entry(j, "model.pt")["size"] = uint64_t{1} << 62;
         t.WriteManifest(j);
       }},
      {"size 2^64-1 with frame count wrapping to 0", "frames for",
       [](HostileSnapshot& t) {
         json j = t.ReadManifest();
         json& f = Entry(j, "small.txt");
         f["size"] = ~uint64_t{0};
         f["frame_size"] = 2;
         f["frames"] = json::array();
         f["stored_size"] = 0;
         t.WriteManifest(j);
       }},
      {"size -1", "not a whole number",
       [](HostileSnapshot& t) {
         json j = t.ReadManifest();
         Entry(j, "small.txt")["size"] = -1;
         t.WriteManifest(j);
       }},
      {"size 4.6e26 (a float)", "not a whole number",
       [](HostileSnapshot& t) {
         json j = t.ReadManifest();
         Entry(j, "small.txt")["size"] = 4.6e26;
         t.WriteManifest(j);
       }},
      {"format a number", "format is not",
       [](HostileSnapshot& t) {
         json j = t.ReadManifest();
         j["format"] = 1;
         t.WriteManifest(j);
       }},
      {"manifest not JSON", "not a JSON object",
       [](HostileSnapshot& t) {
         t.WriteRaw(t.ManifestPath(), t.ReadManifest().dump().substr(0, 100));
       }},
      {"1 TiB that fits the frame rules (free space)", "MiB are free",
       [](HostileSnapshot& t) {
         json j = t.ReadManifest();
         json& f = Entry(j, "small.txt");
         f["frame_size"] = uint64_t{1} << 30;
         f["size"] = uint64_t{1} << 40;
         f["frames"] = OwnFrames(std::vector<uint64_t>(1024, 1), std::string(64, '0'));
         f["stored_size"] = 1024;
         t.WriteManifest(j);
       },
       "small.txt"},
      {"wrong checksum", "SHA-256",
       [](HostileSnapshot& t) {
         json j = t.ReadManifest();
         // The frame's digest (format 3 has no whole-file one); without
         // its XXH3-128, restore checks the SHA-256.
         json& frame = Entry(j, "small.txt")["frames"][0];
         frame.erase("xxh3");
         frame["sha256"] = Sha256Hex("something else");
         t.WriteManifest(j);
       }},
      {"truncated zstd frame", "small.txt",
       [](HostileSnapshot& t) {
         const std::string p = t.ObjectPath("small.txt.zst");
         std::string bytes = *ReadFileToString(p);
         t.WriteRaw(p, bytes.substr(0, bytes.size() - 9));
       }},
      {"corrupt zstd frame header", "small.txt",
       [](HostileSnapshot& t) {
         const std::string p = t.ObjectPath("small.txt.zst");
         std::string bytes = *ReadFileToString(p);
         bytes[0] = 'X';
         t.WriteRaw(p, bytes);
       }},
      {"corrupt bytes in the middle of a frame of a big file", "model.pt",
       [](HostileSnapshot& t) {
         const std::string p = t.ObjectPath("model.pt.zst");
         std::string bytes = *ReadFileToString(p);
         for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 8; ++i) bytes[i] ^= 0x55;
         t.WriteRaw(p, bytes);
       }},
      {"frame that decompresses to more than declared", "small.txt",
       [](HostileSnapshot& t) {
         // A valid zstd frame of 6000 bytes where the manifest promises 5000;
         // frames and stored_size are made consistent so only decoding can tell.
         auto frame = EncodeFrame(Codec::kZstd, std::string(6000, 's'), 3);
         ASSERT_TRUE(frame.ok());
         t.WriteRaw(t.ObjectPath("small.txt.zst"), *frame);
         json j = t.ReadManifest();
         json& f = Entry(j, "small.txt");
         f["frames"] = OwnFrames({frame->size()}, Sha256Hex(std::string(5000, 's')));
         f["stored_size"] = frame->size();
         t.WriteManifest(j);
       }},
      {"frame without content size decompressing past the end", "small.txt",
       [](HostileSnapshot& t) {
         // `zstd` streaming output carries no content size: only the bounded
         // output buffer stops it.
         auto r = RunCommand({"bash", "-c",
                              "head -c 70000 /dev/zero | zstd -q -c --no-content-size > " +
                                  t.ObjectPath("small.txt.zst")});
         ASSERT_EQ(r.exit_code, 0) << r.err;
         const std::string bytes = *ReadFileToString(t.ObjectPath("small.txt.zst"));
         json j = t.ReadManifest();
         json& f = Entry(j, "small.txt");
         f["frames"] = OwnFrames({bytes.size()}, Sha256Hex(std::string(5000, 's')));
         f["stored_size"] = bytes.size();
         t.WriteManifest(j);
       }},
      {"object replaced by a symlink to a file outside the store", "small.txt",
       [](HostileSnapshot& t) {
         const std::string p = t.ObjectPath("small.txt.zst");
         fs::remove(p);
         fs::create_symlink(t.dir_.Join("work/sentinel/keep.txt"), p);
       }},
      {"object missing", "small.txt",
       [](HostileSnapshot& t) { fs::remove(t.ObjectPath("small.txt.zst")); }},
  };

  // Snapshot 1 is taken once by the binary; each case mutates a copy of it.
  TakeSnapshot();
  const std::string pristine = dir_.Join("pristine-store");
  fs::copy(dir_.Join("store"), pristine, fs::copy_options::recursive);
  for (const Mutation& m : mutations) {
    fs::remove_all(dir_.Join("store"));
    fs::copy(pristine, dir_.Join("store"), fs::copy_options::recursive);
    m.apply(*this);
    ExpectRefused(m.name, m.what, m.verify_what.empty() ? m.what : m.verify_what);
    EXPECT_FALSE(fs::exists(outside)) << m.name;
    EXPECT_FALSE(fs::exists(dir_.Join("work/escaped"))) << m.name;
  }
  EXPECT_EQ(cases_, static_cast<int>(mutations.size()));

  ReliabilityRecord r;
  r.test = "hostile_snapshots_file_store";
  r.area = "hostile";
  r.faults =
      "crafted snapshots: .., absolute, key escape, 2^62 and wrapping sizes, wrong types, "
      "bad sha256, truncated/corrupt/oversized zstd frames, symlinked and missing objects";
  r.trials = 2L * cases_;  // restore and verify of each
  r.faults_injected = cases_;
  r.lost = ::testing::Test::HasFailure() ? 1 : 0;
  r.detail = "all " + std::to_string(2 * refused_) + " restore/verify runs of " +
             std::to_string(cases_) +
             " hostile snapshots refused with exit 1, target and "
             "siblings unchanged";
  EXPECT_TRUE(WriteReliabilityRecord(r));
}

// A hostile snapshot is skipped and the previous good one restored in its place.
TEST_F(HostileSnapshot, AHostileNewestSnapshotFallsBackToTheGoodOne) {
  TakeSnapshot();  // 1: good
  WriteTree(dir_.Join("src2"), {{"x.pt", {"x", 0644}}});
  auto snap = Run({"snapshot", "--dir", dir_.Join("src2")});
  ASSERT_EQ(snap.exit_code, 0) << snap.err;
  const std::string m2 = dir_.Join("store/job/snapshots/0000000002/manifest.json");
  json j = json::parse(*ReadFileToString(m2));
  j["files"][0]["path"] = "../sentinel/keep.txt";
  ASSERT_TRUE(WriteFileAtomic(m2, j.dump()).ok());

  auto restore = Run({"restore", "--to", dir_.Join("work/ckpt")});
  ASSERT_EQ(restore.exit_code, 0) << restore.err;
  EXPECT_NE(restore.err.find("SNAPSHOT 0000000002 IS DAMAGED"), std::string::npos) << restore.err;
  EXPECT_NE(restore.err.find("climbs out"), std::string::npos) << restore.err;
  // The good snapshot, beside the previous checkpoint restore did not write.
  Tree want = source_;
  want.insert(previous_.begin(), previous_.end());
  EXPECT_EQ(ReadTree(dir_.Join("work/ckpt")), want);
  EXPECT_EQ(ReadTree(dir_.Join("work/sentinel")), sentinel_);
}

// Symlinks planted in the target (a directory and a file pointing at the
// sentinel) are never followed: restore refuses to replace them (they are
// not its own), and with --force moves them aside, still unfollowed.
TEST_F(HostileSnapshot, SymlinksPlantedInTheTargetAreNotFollowed) {
  WriteTree(dir_.Join("src"), {{"sub/inner.txt", {"restored", 0644}}});
  TakeSnapshot();
  fs::create_directory_symlink(dir_.Join("work/sentinel"), dir_.Join("work/ckpt/sub"));
  fs::create_symlink(dir_.Join("work/sentinel/keep.txt"), dir_.Join("work/ckpt/small.txt"));
  auto refused = Run({"restore", "--to", dir_.Join("work/ckpt")});
  ASSERT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("small.txt"), std::string::npos) << refused.err;
  EXPECT_EQ(ReadTree(dir_.Join("work/sentinel")), sentinel_);
  EXPECT_TRUE(fs::is_symlink(dir_.Join("work/ckpt/sub")));
  auto restore = Run({"restore", "--to", dir_.Join("work/ckpt"), "--force"});
  ASSERT_EQ(restore.exit_code, 0) << restore.err;
  EXPECT_EQ(ReadTree(dir_.Join("work/sentinel")), sentinel_);
  EXPECT_FALSE(fs::is_symlink(dir_.Join("work/ckpt/sub")));
  EXPECT_FALSE(fs::is_symlink(dir_.Join("work/ckpt/small.txt")));
  EXPECT_EQ(*ReadFileToString(dir_.Join("work/ckpt/sub/inner.txt")), "restored");
}

// ---------------------------------------------------------------- configs

TEST(HostileConfig, InvalidConfigsAreUsageErrorsNamingTheProblem) {
  TempDir dir;
  struct Case {
    std::string name, text, what;
  };
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "[";
  std::vector<Case> cases = {
      {"job is a list", R"({"job": ["a"], "store": "file:///s"})", "job"},
      {"keep is an object", R"({"job": "j", "keep": {"n": 3}})", "keep"},
      {"keep is huge", R"({"job": "j", "keep": 99999999999999999999999})", "keep"},
      {"level 2^63", R"({"job": "j", "compression": {"level": 9223372036854775807}})",
       "compression.level"},
      {"keep is a float", R"({"job": "j", "keep": 2.5})", "keep"},
      {"unknown key", R"({"job": "j", "uplaod_interval": "5m"})", "uplaod_interval"},
      {"bad duration", R"({"job": "j", "upload_interval": "5 parsecs"})", "upload_interval"},
      {"negative duration", R"({"job": "j", "upload_interval": "-5m"})", "upload_interval"},
      {"enormous duration", R"({"job": "j", "upload_interval": "99999999999999999999h"})",
       "upload_interval"},
      {"NUL escaped in job", R"({"job": "a\u0000b"})", "job"},
      {"NUL byte in the file", std::string("{\"job\": \"a") + '\0' + "b\"}", "config"},
      {"deep nesting", deep, "config"},
      {"nested section not an object", R"({"job": "j", "compression": 3})", "compression"},
      {"invalid UTF-8", "{\"job\": \"\xff\xfe\"}", "config"},
      {"truncated", R"({"job": "j", "keep": )", "config"},
      {"not an object", R"(["job", "j"])", "config"},
      {"a number beyond a double", R"({"job": "j", "keep": 1e400})", "config"},
      {"a 4 MiB unknown key", "{\"" + std::string(4u << 20, 'k') + "\": 1}", "unknown key"},
  };
  int refused = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.WriteFile("c.json", c.text);
    auto r = RunCommand({SPOTGUARD_BIN, "ls", "--config", path},
                        {{"SPOTGUARD_CONFIG", ""}, {"SPOTGUARD_JOB", ""}, {"SPOTGUARD_STORE", ""}});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.what), std::string::npos) << r.err;
    if (r.exit_code == 2 && r.err.find(c.what) != std::string::npos) ++refused;
  }
  // A list value from the environment is read as JSON too.
  auto env_run = RunCommand({SPOTGUARD_BIN, "ls"}, {{"SPOTGUARD_CONFIG", ""},
                                                    {"SPOTGUARD_JOB", "j"},
                                                    {"SPOTGUARD_STORE", "file:///nonexistent"},
                                                    {"SPOTGUARD_COMMAND", "[1e400]"}});
  EXPECT_EQ(env_run.exit_code, 2) << env_run.err;
  EXPECT_NE(env_run.err.find("command"), std::string::npos) << env_run.err;

  ReliabilityRecord rec;
  rec.test = "hostile_configs";
  rec.area = "hostile";
  rec.faults =
      "wrong types, huge numbers, 1e400, unknown keys, bad durations, NUL bytes, "
      "100000-deep nesting, invalid UTF-8, truncated JSON; [1e400] from the environment";
  rec.trials = static_cast<long>(cases.size()) + 1;
  rec.faults_injected = static_cast<long>(cases.size()) + 1;
  if (env_run.exit_code == 2) ++refused;
  rec.detail = std::to_string(refused) + " of " + std::to_string(cases.size() + 1) +
               " rejected with exit 2 naming the key";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
}

// ------------------------------------------------------------------- IMDS

std::map<std::string, std::string> WatchEnv(const std::string& endpoint) {
  return {{"SPOTGUARD_CONFIG", ""},
          {"SPOTGUARD_IMDS_ENDPOINT", endpoint},
          {"SPOTGUARD_IMDS_POLL_INTERVAL", ""},
          {"AWS_EC2_METADATA_SERVICE_ENDPOINT", ""},
          {"AWS_EC2_METADATA_DISABLED", ""}};
}

std::string Fault(const std::string& path, const std::string& body, int count) {
  // Invalid UTF-8 goes over the control API as U+FFFD.
  return json{{"path", "/latest/" + path}, {"body", body}, {"count", count}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

TEST(HostileImds, AMalformedIdentityDocumentIsAClearError) {
  const std::vector<std::string> bodies = {
      "",
      "{",
      "[]",
      "null",
      "{\"instanceId\": 5, \"region\": \"us-east-1\"}",
      "{\"region\": \"us-east-1\"}",
      std::string(1 << 20, '{'),
      "\xff\xfe garbage",
      "{\"instanceId\": \"i-1\", \"region\": \"us-east-1\", \"availabilityZone\": [], "
      "\"instanceType\": {}}"};
  int clear = 0;
  for (const std::string& body : bodies) {
    SCOPED_TRACE(body.substr(0, 40));
    ImdsSimulator sim;
    sim.Control("POST", "/_sim/fault", Fault("dynamic/instance-identity/document", body, -1));
    auto r = RunCommand({SPOTGUARD_BIN, "watch", "--once"}, WatchEnv(sim.endpoint()),
                        std::chrono::seconds(60));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("did not give the instance identity"), std::string::npos) << r.err;
    if (r.exit_code == 1) ++clear;
  }
  ReliabilityRecord rec;
  rec.test = "hostile_imds_identity";
  rec.area = "hostile";
  rec.faults = "malformed identity documents (empty, truncated, wrong types, 1 MiB of '{', binary)";
  rec.trials = static_cast<long>(bodies.size());
  rec.faults_injected = static_cast<long>(bodies.size());
  rec.detail = std::to_string(clear) + " of " + std::to_string(bodies.size()) +
               " refused by `watch --once` with exit 1";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
}

// Malformed notice, lifecycle and rebalance bodies are failed polls (warned
// about, never an event, never a crash); the real notice that follows still
// ends `watch --once`.
TEST(HostileImds, MalformedNoticesAreWarnedAboutAndTheRealOneStillCounts) {
  ImdsSimulator sim;
  const std::vector<std::pair<std::string, std::string>> hostile = {
      {"meta-data/spot/instance-action", "{\"action\": \"terminate\", \"time\": "},
      {"meta-data/spot/instance-action", "{\"action\": 7, \"time\": \"2026-11-22T08:22:00Z\"}"},
      {"meta-data/spot/instance-action",
       "{\"action\": \"terminate\", \"time\": \"-954-01-01T00:00:00Z\"}"},
      {"meta-data/spot/instance-action",
       "{\"action\": \"terminate\", \"time\": \"9999-01-01T00:00:00Z\"}"},
      {"meta-data/spot/instance-action", "[\"terminate\"]"},
      {"meta-data/spot/instance-action", "{\"action\": \"terminate\", \"time\": 1e400}"},
      {"meta-data/spot/instance-action", std::string(100000, '[')},
      {"meta-data/autoscaling/target-lifecycle-state", "Terminated\x01; rm -rf /"},
      {"meta-data/events/recommendations/rebalance", "{\"noticeTime\": 5}"},
      {"meta-data/events/maintenance/scheduled", "[{\"EventId\": 1}, 3]"},
  };
  for (const auto& [path, body] : hostile) {
    sim.Control("POST", "/_sim/fault", Fault(path, body, 2));
  }
  sim.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 120})");
  auto env = WatchEnv(sim.endpoint());
  env["SPOTGUARD_IMDS_POLL_INTERVAL"] = "100ms";
  auto r = RunCommand({SPOTGUARD_BIN, "watch", "--once", "--json"}, env, std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("malformed body"), std::string::npos) << r.err;
  // Exactly one event: the real notice.
  int notices = 0, lines = 0;
  for (const std::string& line : std::vector<std::string>{r.out}) {
    for (size_t at = 0; (at = line.find("\"kind\":", at)) != std::string::npos; ++at) ++lines;
  }
  notices = r.out.find("\"action\":\"terminate\"") != std::string::npos ? 1 : 0;
  EXPECT_EQ(lines, 1) << r.out;
  EXPECT_EQ(notices, 1) << r.out;
  EXPECT_EQ(r.out.find("rm -rf"), std::string::npos) << r.out;

  ReliabilityRecord rec;
  rec.test = "hostile_imds_bodies";
  rec.area = "hostile";
  rec.faults = "malformed instance-action, lifecycle, rebalance, scheduled-events bodies";
  rec.trials = 1;
  rec.faults_injected = static_cast<long>(2 * hostile.size());
  rec.detail =
      "no event from any malformed body, warnings logged, the real notice ended watch --once";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
}

}  // namespace
}  // namespace sg::testing
