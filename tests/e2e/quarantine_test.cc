// Quarantine of a damaged shared object (docs/design.md §4, "Quarantine")
// through the spotguard binary on the S3 gateway: `verify` finds the damage,
// exits 1 and names the object it quarantined; the next `snapshot` stores
// the shared file afresh; `restore` gives its bytes back; `status` names
// the quarantined object and `ls` marks the snapshots that need it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent/repo/quarantine.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/store_layout.h"
#include "tests/e2e/e2e_base.h"
#include "tests/support/random_bytes.h"
#include "tests/support/subprocess.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

class QuarantineE2E : public E2EBase {
 protected:
  void SetUp() override {
    UseS3("quarantine-tests");
    config_ = WriteJobConfig("job", BaseConfig());
  }
  CommandResult Cli(const std::string& command, std::vector<std::string> args = {}) {
    args.insert(args.begin(), {SPOTGUARD_BIN, command, "-c", config_});
    return RunCommand(args, AgentEnv(), std::chrono::seconds(120));
  }
  // `spotguard snapshot` of `tree`; the seq it printed (0 on failure).
  uint64_t Snapshot(const Tree& tree) {
    const std::string dir = dir_.Join("ckpt-" + std::to_string(++snapshots_));
    WriteTree(dir, tree);
    auto r = Cli("snapshot", {"--dir", dir});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? std::stoull(r.out) : 0;
  }
  Manifest ManifestOf(uint64_t seq) {
    auto m = SnapshotCatalog(*store_, "job").ReadManifest(seq);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : Manifest{};
  }
  // A frozen base the snapshots share (random bytes: one frame of codec
  // none) and an adapter of the step.
  Tree Checkpoint(int step) const {
    return {{"base.bin", {base_, 0644}}, {"adapter.bin", {RandomBytes(4000, 50 + step), 0644}}};
  }

  const std::string base_ = RandomBytes(300000, 9);
  std::string config_;
  int snapshots_ = 0;
};

TEST_F(QuarantineE2E, ADamagedSharedObjectIsQuarantinedByVerifyAndStoredAfreshNextTime) {
  ASSERT_EQ(Snapshot(Checkpoint(1)), 1u);
  ASSERT_EQ(Snapshot(Checkpoint(2)), 2u);
  const std::string shared = "snapshots/0000000001/files/base.bin";
  const Manifest second = ManifestOf(2);
  ASSERT_EQ(second.files[1].path, "base.bin");
  ASSERT_EQ(second.files[1].frames[0].key, shared) << "the base is shared";

  // Damage the shared object in the store: one byte overwritten.
  auto body = store_->Get("job/" + shared);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  (*body)[body->size() / 2] ^= 0x20;
  ASSERT_TRUE(store_->Put("job/" + shared, *body, PutCondition::None()).ok());

  auto verify = Cli("verify");
  EXPECT_EQ(verify.exit_code, 1) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("quarantined " + shared + ": found damaged now"), std::string::npos)
      << verify.out;
  EXPECT_NE(verify.err.find("base.bin"), std::string::npos) << verify.err;
  auto quarantined = ReadQuarantine(*store_, "job");
  ASSERT_TRUE(quarantined.ok()) << quarantined.status().ToString();
  EXPECT_EQ(*quarantined, std::set<std::string>{shared});
  // `ls` marks the snapshots that need it (2; 1 stored it and is damaged
  // itself, so it needs it too).
  auto ls = Cli("ls", {"--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  const auto rows = nlohmann::json::parse(ls.out);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    EXPECT_EQ(row["quarantined"], nlohmann::json::array({shared})) << row.dump();
  }
  auto ls_text = Cli("ls");
  EXPECT_NE(ls_text.out.find("SUSPECT  QUARANTINED\n"), std::string::npos) << ls_text.out;
  EXPECT_NE(ls_text.out.find("yes\n"), std::string::npos) << ls_text.out;

  // The next snapshot stores the base afresh and references nothing quarantined.
  ASSERT_EQ(Snapshot(Checkpoint(3)), 3u);
  const Manifest third = ManifestOf(3);
  for (const ManifestFile& f : third.files) {
    for (const FrameRef& r : f.frames) {
      EXPECT_NE(r.key, shared) << f.path;
      EXPECT_EQ(r.key, f.key) << f.path << ": a fresh object of snapshot 3";
    }
  }
  auto restore = Cli("restore", {"--to", dir_.Join("back")});
  ASSERT_EQ(restore.exit_code, 0) << restore.err;
  EXPECT_EQ(ReadTree(dir_.Join("back")), Checkpoint(3));

  // Snapshot 3 verifies whole; `verify` and `status` still name the object.
  auto clean = Cli("verify");
  EXPECT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_NE(clean.out.find("quarantined " + shared + "\n"), std::string::npos) << clean.out;
  auto status = Cli("status", {"--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const auto j = nlohmann::json::parse(status.out);
  EXPECT_EQ(j["snapshots"]["quarantined"], nlohmann::json::array({shared}));
  EXPECT_EQ(j["snapshots"]["newest"]["quarantined"], nlohmann::json::array());
  ls = Cli("ls", {"--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_EQ(nlohmann::json::parse(ls.out)[0]["quarantined"], nlohmann::json::array())
      << "snapshot 3 needs nothing quarantined";
  auto text = Cli("status");
  EXPECT_NE(text.out.find("quarantined      " + shared), std::string::npos) << text.out;
}

}  // namespace
}  // namespace sg::testing
