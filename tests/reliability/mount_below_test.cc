// A file system mounted below a restore's target (issue 32, item 1): the
// shared placement code (agent/repo/restore_placement.h) never copies across it,
// never unlinks on it, and refuses it naming the mount, for `restore`, for
// `run`'s restore at start and for a group survivor's restore each round
// (RestoreGroupPart). Real tmpfs mounts, made as root in a mount namespace of
// this test process's own (as under `unshare --mount`), so nothing is seen
// outside it. The command-line paths are in tests/e2e/restore_safety_test.cc.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>

#include <cstring>
#include <filesystem>
#include <mutex>

#include "agent/repo/store_layout.h"
#include "agent/repo/group_restore.h"
#include "agent/repo/restore_placement.h"
#include "agent/repo/restorer.h"
#include "common/files.h"
#include "common/log.h"
#include "common/mounts.h"
#include "tests/support/file_store_fixture.h"

namespace sg::testing {
namespace {

// This process in a mount namespace of its own, with / private: what it
// mounts is never seen outside, and goes when the process ends.
Status EnterPrivateMountNamespace() {
  static const Status entered = [] {
    if (::unshare(CLONE_NEWNS) != 0) return Status::FromErrno(errno, "unshare(CLONE_NEWNS)");
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      return Status::FromErrno(errno, "mount --make-rprivate /");
    }
    return Status::Ok();
  }();
  return entered;
}

std::string Text(const std::string& path) {
  auto text = ReadFileToString(path);
  return text.ok() ? *text : "<" + text.status().ToString() + ">";
}

// A tmpfs (or a bind mount of `source`) at `at`, unmounted at the end.
class Mount {
 public:
  explicit Mount(const std::string& at, const std::string& source = "") : at_(at) {
    std::error_code ec;
    if (source.empty()) std::filesystem::create_directories(at, ec);
    const int r = source.empty() ? ::mount("tmpfs", at.c_str(), "tmpfs", 0, "size=4m")
                                 : ::mount(source.c_str(), at.c_str(), nullptr, MS_BIND, nullptr);
    if (r != 0) error_ = "mount at " + at + ": " + std::strerror(errno);
  }
  ~Mount() {
    if (error_.empty()) ::umount2(at_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }

 private:
  std::string at_;
  std::string error_;
};

class MountBelowTarget : public FileStoreTest {
 protected:
  void SetUp() override {
    Status entered = EnterPrivateMountNamespace();
    ASSERT_TRUE(entered.ok()) << "this test needs root (CAP_SYS_ADMIN) and a single-threaded "
                              << "process: " << entered.ToString();
    FileStoreTest::SetUp();
  }

  // A verified download beside `target`, as Restorer leaves it before placing.
  std::string Staged(const std::string& target, const Tree& tree) {
    const std::string staged =
        DirName(target) + "/." + target.substr(target.rfind('/') + 1) + ".spotguard-restore-1-test";
    WriteTree(staged, tree);
    std::vector<std::string> paths;
    for (const auto& [rel, f] : tree) paths.push_back(rel);
    EXPECT_TRUE(WriteRestoreMarker(staged, "1-test", 1, paths).ok());
    return staged;
  }

  std::vector<std::string> MountsBelow(const std::string& dir) {
    std::vector<std::string> paths;
    for (const MountPoint& m : MountPointsBelow(dir)) paths.push_back(m.path);
    return paths;
  }
};

TEST_F(MountBelowTarget, PlacementRefusesADirectoryMountedAfterTheChecks) {
  const std::string target = dir_.Join("tgt");
  WriteTree(target, {{"notes.txt", {"mine"}}});
  Mount data(target + "/data");
  ASSERT_EQ(data.error(), "");
  dir_.WriteFile("tgt/data/dataset.txt", "the dataset");
  const std::string staged = Staged(target, {{"model.pt", {"weights"}}});

  auto placed = PlaceRestoredDir(staged, target);
  ASSERT_FALSE(placed.ok()) << "placed across a mount";
  EXPECT_TRUE(IsRestoreRefusal(placed.status())) << placed.status().ToString();
  EXPECT_NE(placed.status().message().find(target + "/data"), std::string::npos)
      << placed.status().message();
  EXPECT_EQ(MountsBelow(target), std::vector<std::string>{target + "/data"});
  EXPECT_EQ(ReadTree(target),
            (Tree{{"notes.txt", {"mine"}}, {"data/dataset.txt", {"the dataset"}}}));
  EXPECT_FALSE(std::filesystem::exists(staged + "/data")) << "nothing was copied off the mount";
}

TEST_F(MountBelowTarget, PlacementRefusesAFileBindMountedBelowTheTarget) {
  const std::string target = dir_.Join("tgt");
  WriteTree(target, {{"token", {"a placeholder"}}});
  const std::string source = dir_.WriteFile("elsewhere/token", "the real token");
  Mount bind(target + "/token", source);
  ASSERT_EQ(bind.error(), "");
  const std::string staged = Staged(target, {{"model.pt", {"weights"}}});

  auto placed = PlaceRestoredDir(staged, target);
  ASSERT_FALSE(placed.ok()) << "placed across a mount";
  EXPECT_TRUE(IsRestoreRefusal(placed.status())) << placed.status().ToString();
  EXPECT_NE(placed.status().message().find(target + "/token"), std::string::npos)
      << placed.status().message();
  EXPECT_EQ(Text(target + "/token"), "the real token");
  EXPECT_FALSE(std::filesystem::exists(staged + "/token")) << "nothing was copied off the mount";
}

// The state an earlier restore left after its swap took a mount away with
// the old contents (as before this fix): the next restore settles that dir
// without touching the mount, and says what it kept (never "0 file(s)").
TEST_F(MountBelowTarget, SettlingNeverTouchesAMountTheSwapTookAway) {
  const std::string target = dir_.Join("tgt");
  const std::string old = dir_.Join(".tgt.spotguard-restore-999999-dead");
  Mount data(old + "/data");
  ASSERT_EQ(data.error(), "");
  dir_.WriteFile(".tgt.spotguard-restore-999999-dead/data/dataset.txt", "the dataset");
  // The copy the carrier made of it then: same size and mtime.
  dir_.WriteFile("tgt/data/dataset.txt", "the dataset");
  std::filesystem::last_write_time(target + "/data/dataset.txt",
                                   std::filesystem::last_write_time(old + "/data/dataset.txt"));
  std::mutex mu;
  std::vector<std::string> warnings;
  InitLogging(LogLevel::kInfo, LogFormat::kText);
  SetLogTap([&](std::string_view, std::string_view level, std::string_view message) {
    std::lock_guard<std::mutex> lock(mu);
    if (level == "warn") warnings.emplace_back(message);
  });
  Status st = RecoverAbandonedRestoreDir(old, "999999-dead", target);
  SetLogTap({});
  ASSERT_TRUE(st.ok()) << st.ToString();

  std::vector<std::string> backups;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    if (e.path().filename().string().starts_with("tgt.spotguard-backup-")) {
      backups.push_back(e.path().string());
    }
  }
  ASSERT_EQ(backups.size(), 1u);
  EXPECT_EQ(Text(backups[0] + "/data/dataset.txt"), "the dataset")
      << "a file on the mount was deleted";
  EXPECT_EQ(MountsBelow(backups[0]), std::vector<std::string>{backups[0] + "/data"});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "1 entry of the previous contents of " + target +
                             " that could not be settled (e.g. data/ (a mount point, left "
                             "untouched)) are kept in " +
                             backups[0]);
}

// A survivor of a group round restores its part with RestoreGroupPart, into
// its checkpoint dir, each round.
TEST_F(MountBelowTarget, AGroupSurvivorsRestoreRefusesAMountBelowTheCheckpointDir) {
  SnapshotRequest request;
  request.job = PartJob("job", 0);
  auto written = CommitTree({{"step_10/model.pt", {"rank zero's weights"}}}, request, 10);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  GroupCommit group;
  group.seq = 1;
  group.nodes = 1;
  group.step = 10;
  group.parts = {PartRecord{0, 10, written->seq, "i-test", 0, 0}};
  const std::string ckpt = dir_.Join("ckpt");
  Mount data(ckpt + "/data");
  ASSERT_EQ(data.error(), "");
  dir_.WriteFile("ckpt/data/dataset.txt", "the dataset");
  RestoreOptions options;
  options.replace_foreign = true;  // as GroupAgent restores

  auto restored = RestoreGroupPart(*store_, "job", Preset::kGeneric, group, 0, ckpt, options);
  ASSERT_FALSE(restored.ok()) << "restored across a mount";
  EXPECT_TRUE(IsRestoreRefusal(restored.status())) << restored.status().ToString();
  EXPECT_NE(restored.status().message().find(ckpt + "/data (tmpfs)"), std::string::npos)
      << restored.status().message();
  EXPECT_EQ(ReadTree(ckpt), (Tree{{"data/dataset.txt", {"the dataset"}}}));
  EXPECT_EQ(MountsBelow(ckpt), std::vector<std::string>{ckpt + "/data"});
}

}  // namespace
}  // namespace sg::testing
