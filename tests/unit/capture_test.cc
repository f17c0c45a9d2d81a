#include "agent/detect/capture.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "agent/detect/presets.h"
#include "common/files.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

namespace fs = std::filesystem;

class CaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ckpt_ = tmp_.Join("ckpt");
    staging_ = tmp_.Join(".spotguard-staging-job");
    fs::create_directories(ckpt_);
  }

  // The checkpoint the detector would report for these files now.
  Checkpoint Detected(const std::vector<std::string>& relpaths) {
    auto files = ListCheckpointDir(ckpt_);
    EXPECT_TRUE(files.ok());
    Checkpoint c;
    c.id = c.resume = relpaths[0];
    c.relpaths = relpaths;
    for (const ListedFile& f : *files) {
      if (std::find(relpaths.begin(), relpaths.end(), f.relpath) != relpaths.end()) {
        c.newest_mtime = std::max(c.newest_mtime, f.mtime);
      }
    }
    return c;
  }

  void Write(const std::string& rel, const std::string& data, mode_t mode = 0644) {
    fs::create_directories(fs::path(ckpt_ + "/" + rel).parent_path());
    ASSERT_TRUE(WriteFileAtomic(ckpt_ + "/" + rel, data, mode).ok());
  }

  // Rewrites a file in place: same inode, same size, new bytes.
  void RewriteInPlace(const std::string& rel, const std::string& data) {
    auto fd = OpenFile(ckpt_ + "/" + rel, O_WRONLY);
    ASSERT_TRUE(fd.ok());
    ASSERT_TRUE(WriteAll(fd->get(), data, rel).ok());
  }

  testing::TempDir tmp_;
  std::string ckpt_;
  std::string staging_;
};

TEST_F(CaptureTest, HardlinksEveryFileAndRemovesTheStagingDirWhenDone) {
  Write("checkpoint-20/model.safetensors", "model", 0640);
  Write("checkpoint-20/trainer_state.json", "{}");
  const std::string model = ckpt_ + "/checkpoint-20/model.safetensors";
  std::string staging_dir;
  {
    auto captured = CapturedCheckpoint::Capture(
        ckpt_, Detected({"checkpoint-20/trainer_state.json", "checkpoint-20/model.safetensors"}),
        staging_);
    ASSERT_TRUE(captured.ok()) << captured.status().ToString();
    staging_dir = captured->staging_dir();
    EXPECT_TRUE(staging_dir.starts_with(staging_ + "/capture-"));
    ASSERT_EQ(captured->files().size(), 2u);
    const CapturedFile& f = captured->files()[0];
    EXPECT_EQ(f.relpath, "checkpoint-20/model.safetensors");
    EXPECT_EQ(f.staged_path, staging_dir + "/checkpoint-20/model.safetensors");
    EXPECT_TRUE(f.linked);
    EXPECT_EQ(f.mode, 0640u);
    EXPECT_EQ(f.size, 5u);
    struct stat st {};
    ASSERT_EQ(::stat(model.c_str(), &st), 0);
    EXPECT_EQ(f.identity.ino, st.st_ino);
    EXPECT_EQ(captured->total_bytes(), 7u);
    EXPECT_TRUE(captured->Verify().ok());

    // Moving keeps one owner of the staging dir.
    CapturedCheckpoint moved = std::move(*captured);
    EXPECT_EQ(moved.staging_dir(), staging_dir);
    EXPECT_TRUE(fs::exists(staging_dir));
  }
  EXPECT_FALSE(fs::exists(staging_dir));
  EXPECT_TRUE(fs::exists(model));  // the trainer's files are untouched
  EXPECT_TRUE(fs::is_empty(staging_));
}

TEST_F(CaptureTest, VerifyNamesTheFileRewrittenInPlace) {
  Write("a.pt", "aaaa");
  Write("b.pt", "bbbb");
  auto captured = CapturedCheckpoint::Capture(ckpt_, Detected({"a.pt", "b.pt"}), staging_);
  ASSERT_TRUE(captured.ok()) << captured.status().ToString();
  RewriteInPlace("b.pt", "BBBB");  // same size; only the mtime tells
  Status st = captured->Verify();
  EXPECT_TRUE(st.Is(StatusCode::kUnavailable)) << st.ToString();
  EXPECT_NE(st.message().find("b.pt"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("a.pt"), std::string::npos) << st.message();
}

TEST_F(CaptureTest, RenameOverOrDeletionOfTheOriginalLeavesTheCaptureIntact) {
  Write("last.pt", "old");
  Write("best.pt", "best");
  auto captured = CapturedCheckpoint::Capture(ckpt_, Detected({"best.pt", "last.pt"}), staging_);
  ASSERT_TRUE(captured.ok()) << captured.status().ToString();
  Write("last.pt", "new!");  // tmp + rename over it
  fs::remove(ckpt_ + "/best.pt");
  EXPECT_TRUE(captured->Verify().ok());
  EXPECT_EQ(*ReadFileToString(captured->files()[1].staged_path), "old");
  EXPECT_EQ(*ReadFileToString(captured->files()[0].staged_path), "best");
}

TEST_F(CaptureTest, FileChangedSinceDetectionIsRefused) {
  Write("a.pt", "aaaa");
  Checkpoint detected = Detected({"a.pt"});
  // Past the kernel's timestamp tick, so the rewrite gets a later mtime. A
  // lower bound: a slow machine only sleeps longer.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  RewriteInPlace("a.pt", "AAAA");
  auto captured = CapturedCheckpoint::Capture(ckpt_, detected, staging_);
  EXPECT_TRUE(captured.status().Is(StatusCode::kUnavailable)) << captured.status().ToString();
  EXPECT_NE(captured.status().message().find("a.pt"), std::string::npos);
  EXPECT_TRUE(fs::is_empty(staging_));  // nothing left behind
}

TEST_F(CaptureTest, FileGoneSinceDetectionIsRefused) {
  Write("a.pt", "aaaa");
  Checkpoint detected = Detected({"a.pt"});
  fs::remove(ckpt_ + "/a.pt");
  auto captured = CapturedCheckpoint::Capture(ckpt_, detected, staging_);
  EXPECT_TRUE(captured.status().Is(StatusCode::kUnavailable)) << captured.status().ToString();
  EXPECT_TRUE(fs::is_empty(staging_));
}

TEST_F(CaptureTest, UnsafePathsAreRefused) {
  Write("a.pt", "a");
  for (const char* bad : {"../a.pt", "/etc/passwd", "x/../../a.pt", "./a.pt", "a//b", ""}) {
    Checkpoint c = Detected({"a.pt"});
    c.relpaths = {bad};
    auto captured = CapturedCheckpoint::Capture(ckpt_, c, staging_);
    EXPECT_TRUE(captured.status().Is(StatusCode::kInvalidArgument)) << bad;
  }
}

TEST_F(CaptureTest, AnotherFilesystemGetsACheckedCopy) {
  // /dev/shm is a tmpfs: links from the checkpoint dir fail with EXDEV.
  struct stat shm {
  }, here{};
  ASSERT_EQ(::stat("/dev/shm", &shm), 0) << "this test needs /dev/shm";
  ASSERT_EQ(::stat(ckpt_.c_str(), &here), 0);
  ASSERT_NE(shm.st_dev, here.st_dev) << "/dev/shm is on the same filesystem as " << ckpt_;
  const std::string staging = "/dev/shm/spotguard-capture-test-" + RandomHex();
  Write("a.pt", std::string(3 << 20, 'a'), 0600);
  {
    auto captured = CapturedCheckpoint::Capture(ckpt_, Detected({"a.pt"}), staging);
    ASSERT_TRUE(captured.ok()) << captured.status().ToString();
    const CapturedFile& f = captured->files()[0];
    EXPECT_FALSE(f.linked);
    EXPECT_EQ(f.mode, 0600u);
    EXPECT_EQ(f.size, 3u << 20);
    EXPECT_EQ(*ReadFileToString(f.staged_path), std::string(3 << 20, 'a'));
    RewriteInPlace("a.pt", "b");  // the copy is private: the original may change
    EXPECT_TRUE(captured->Verify().ok());
  }
  fs::remove_all(staging);
}

TEST_F(CaptureTest, StagingRootIsBesideTheCheckpointDir) {
  auto root = PrepareStagingRoot(ckpt_ + "/", "resnet/50");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ(*root, tmp_.Join(".spotguard-staging-resnet_50"));
  EXPECT_TRUE(fs::is_directory(*root));
  EXPECT_EQ(fs::status(*root).permissions() & fs::perms::all, fs::perms::owner_all);
}

TEST_F(CaptureTest, StaleCapturesAreRemoved) {
  fs::create_directories(staging_ + "/capture-abc123/sub");
  fs::create_directories(staging_ + "/other");
  ASSERT_TRUE(RemoveStaleCaptures(staging_).ok());
  EXPECT_FALSE(fs::exists(staging_ + "/capture-abc123"));
  EXPECT_TRUE(fs::exists(staging_ + "/other"));
  EXPECT_TRUE(RemoveStaleCaptures(tmp_.Join("missing")).ok());
}

}  // namespace
}  // namespace sg
