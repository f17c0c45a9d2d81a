// Unit tests of the fixes the crash trials led to (file:// store, no
// gateway): restore goes by the newest manifest, not a lagging `latest`;
// restore removes the temp dirs of killed restores; retention after a
// snapshot keeps young uncommitted snapshots (a live writer's) for the hour.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "agent/cli/cli.h"
#include "agent/repo/manifest.h"
#include "agent/repo/restore_placement.h"
#include "agent/repo/restorer.h"
#include "agent/repo/snapshot_writer.h"
#include "common/file_store.h"
#include "common/files.h"
#include "tests/support/capture_in_place.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

class CrashFixes : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = FileStore::Open(dir_.Join("store"));
    ASSERT_TRUE(opened.ok());
    store_ = std::move(*opened);
  }
  uint64_t Snapshot(const std::string& content) {
    const std::string src = dir_.WriteFile("src-" + RandomHex(3) + "/m", content);
    SnapshotRequest req;
    req.job = "job";
    auto capture = CaptureFile("m", src);
    EXPECT_TRUE(capture.ok()) << capture.status().ToString();
    if (!capture.ok()) return 0;
    req.preset = "generic";
    SnapshotWriter writer(*store_, SystemClock(), SnapshotOptions{});
    auto r = writer.Write(*capture, req);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->seq : 0;
  }
  StatusOr<RestoreResult> Restore(const std::string& to) {
    Restorer restorer(*store_, RestoreOptions{});
    return restorer.Restore("job", dir_.Join(to), std::nullopt);
  }

  TempDir dir_;
  std::unique_ptr<FileStore> store_;
};

TEST_F(CrashFixes, RestoreTakesTheNewestManifestWhenLatestLagsAboveAnAbandonedSeq) {
  ASSERT_EQ(Snapshot("one"), 1u);
  ASSERT_EQ(Snapshot("two"), 2u);
  // Seq 3 abandoned by a writer killed after its claim; seq 4 committed by a
  // writer killed between its manifest and `latest`.
  ASSERT_TRUE(store_->Put(ClaimKey("job", 3), "{}", PutCondition::CreateOnly()).ok());
  ASSERT_EQ(Snapshot("four"), 4u);
  ASSERT_TRUE(store_->Put(LatestKey("job"), "0000000002\n", PutCondition::None()).ok());
  auto r = Restore("out");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, 4u);
  EXPECT_EQ(*ReadFileToString(dir_.Join("out/m")), "four");
}

TEST_F(CrashFixes, RestoreRemovesTheTempDirsOfKilledRestoresOnly) {
  ASSERT_EQ(Snapshot("new"), 1u);
  // A pid that no longer runs: a child that has exited and been reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const std::string dead = ".out.spotguard-restore-" + std::to_string(child) + "-0a0b0c0d";
  const std::string live = ".out.spotguard-restore-1-0a0b0c0d";  // pid 1 runs
  dir_.WriteFile(dead + "/m", "partial");
  // A restore writes its marker (naming itself) first: killed before its
  // swap, its temp dir holds only its own download.
  ASSERT_TRUE(
      WriteRestoreMarker(dir_.Join(dead), dead.substr(dead.rfind("restore-") + 8), 1, {}).ok());
  dir_.WriteFile(live + "/m", "in progress elsewhere");
  dir_.WriteFile("out/notes", "old");
  auto r = Restore("out");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*ReadFileToString(dir_.Join("out/m")), "new");
  EXPECT_EQ(*ReadFileToString(dir_.Join("out/notes")), "old");
  EXPECT_FALSE(std::filesystem::exists(dir_.Join(dead))) << "left by a killed restore";
  EXPECT_TRUE(std::filesystem::exists(dir_.Join(live))) << "a running restore's";
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "out" || name == "store" || name.starts_with("src-") || name == live)
        << "left behind: " << name;
  }
}

TEST_F(CrashFixes, RetentionAfterASnapshotKeepsAYoungUncommittedSnapshot) {
  ASSERT_EQ(Snapshot("one"), 1u);
  // Another writer's snapshot in progress: claimed, one object, no manifest.
  ASSERT_TRUE(store_->Put(ClaimKey("job", 2), "{}", PutCondition::CreateOnly()).ok());
  ASSERT_TRUE(store_->Put(SnapshotPrefix("job", 2) + "files/m", "x", PutCondition::None()).ok());
  const std::string src = dir_.WriteFile("cli-src/m", "three");
  const std::map<std::string, std::string> env = {{"SPOTGUARD_LOG_LEVEL", "warn"}};
  const std::vector<std::string> common = {"--job", "job", "--store",
                                           "file://" + dir_.Join("store")};
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "spotguard");
    args.insert(args.end(), common.begin(), common.end());
    return RunCli(args, env);
  };
  ASSERT_EQ(cli({"snapshot", "--dir", dir_.Join("cli-src")}), 0);
  EXPECT_TRUE(store_->Head(ClaimKey("job", 2)).ok())
      << "retention removed a live writer's snapshot";
  ASSERT_EQ(cli({"gc"}), 0);
  EXPECT_TRUE(store_->Head(ClaimKey("job", 2)).ok()) << "gc removed a live writer's snapshot";
  // A claim written in the last ten minutes is a live writer's, whatever
  // --older-than says (docs/design.md §4, "Live writers").
  ASSERT_EQ(cli({"gc", "--older-than", "0s"}), 0);
  EXPECT_TRUE(store_->Head(ClaimKey("job", 2)).ok()) << "gc removed a live claim's snapshot";
  // Told that no writer is alive, gc removes it.
  ASSERT_EQ(cli({"gc", "--older-than", "0s", "--break-claims"}), 0);
  EXPECT_TRUE(store_->Head(ClaimKey("job", 2)).status().Is(StatusCode::kNotFound));
  EXPECT_TRUE(store_->Head(ManifestKey("job", 3)).ok());
  EXPECT_EQ(cli({"gc", "--older-than", "soon"}), 2);
}

}  // namespace
}  // namespace sg::testing
