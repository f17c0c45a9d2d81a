#include "common/inotify_watcher.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace sg {
namespace {

using Kind = WatchEvent::Kind;
using std::chrono::milliseconds;

std::string Describe(const std::vector<WatchEvent>& events) {
  std::string out;
  for (const WatchEvent& e : events) {
    out += std::string(WatchEventKindName(e.kind)) + " " + e.path + (e.is_dir ? "/" : "") + "\n";
  }
  return out;
}

bool Has(const std::vector<WatchEvent>& events, Kind kind, const std::string& path) {
  for (const WatchEvent& e : events) {
    if (e.kind == kind && e.path == path) return true;
  }
  return false;
}

class InotifyWatcherTest : public ::testing::Test {
 protected:
  void Open(InotifyWatcher::IgnoreFn ignore = nullptr) {
    auto w = InotifyWatcher::Open(dir_.path(), std::move(ignore));
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    watcher_ = std::move(*w);
  }
  std::vector<WatchEvent> Read() {
    auto events = watcher_->ReadEvents();
    EXPECT_TRUE(events.ok()) << events.status().ToString();
    return events.ok() ? *events : std::vector<WatchEvent>{};
  }

  testing::TempDir dir_;
  std::unique_ptr<InotifyWatcher> watcher_;
};

TEST_F(InotifyWatcherTest, ReportsCreateWriteAndCloseOfAFile) {
  Open();
  EXPECT_TRUE(Read().empty());
  const int fd = ::open(dir_.Join("a.pt").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "abc", 3), 3);
  auto open_events = Read();
  EXPECT_TRUE(Has(open_events, Kind::kCreated, "a.pt")) << Describe(open_events);
  EXPECT_TRUE(Has(open_events, Kind::kModified, "a.pt")) << Describe(open_events);
  EXPECT_FALSE(Has(open_events, Kind::kClosedWrite, "a.pt"));
  ::close(fd);
  auto closed = Read();
  EXPECT_TRUE(Has(closed, Kind::kClosedWrite, "a.pt")) << Describe(closed);
}

TEST_F(InotifyWatcherTest, WatchesExistingSubdirectoriesAndReportsRenamesAndDeletes) {
  dir_.WriteFile("run/ckpt/old.pt", "x");
  Open();
  EXPECT_EQ(watcher_->watched_dirs(), 3u);
  dir_.WriteFile("run/ckpt/new.pt.tmp", "data");
  std::filesystem::rename(dir_.Join("run/ckpt/new.pt.tmp"), dir_.Join("run/ckpt/new.pt"));
  std::filesystem::remove(dir_.Join("run/ckpt/old.pt"));
  auto events = Read();
  EXPECT_TRUE(Has(events, Kind::kClosedWrite, "run/ckpt/new.pt.tmp")) << Describe(events);
  EXPECT_TRUE(Has(events, Kind::kMovedOut, "run/ckpt/new.pt.tmp")) << Describe(events);
  EXPECT_TRUE(Has(events, Kind::kMovedIn, "run/ckpt/new.pt")) << Describe(events);
  EXPECT_TRUE(Has(events, Kind::kDeleted, "run/ckpt/old.pt")) << Describe(events);
}

TEST_F(InotifyWatcherTest, NewDirectoriesAreWatchedAndReported) {
  Open();
  std::filesystem::create_directories(dir_.Join("checkpoint-10/sub"));
  auto added = Read();
  EXPECT_TRUE(Has(added, Kind::kDirAdded, "checkpoint-10")) << Describe(added);
  EXPECT_EQ(watcher_->watched_dirs(), 3u);
  dir_.WriteFile("checkpoint-10/sub/x.bin", "x");
  auto inside = Read();
  EXPECT_TRUE(Has(inside, Kind::kClosedWrite, "checkpoint-10/sub/x.bin")) << Describe(inside);
}

TEST_F(InotifyWatcherTest, DirectoryRenamedWithinTheTreeIsReportedUnderItsNewName) {
  dir_.WriteFile("tmp-checkpoint-30/model.bin", "m");
  Open();
  std::filesystem::rename(dir_.Join("tmp-checkpoint-30"), dir_.Join("checkpoint-30"));
  auto moved = Read();
  EXPECT_TRUE(Has(moved, Kind::kMovedOut, "tmp-checkpoint-30")) << Describe(moved);
  EXPECT_TRUE(Has(moved, Kind::kDirAdded, "checkpoint-30")) << Describe(moved);
  dir_.WriteFile("checkpoint-30/trainer_state.json", "{}");
  auto after = Read();
  EXPECT_TRUE(Has(after, Kind::kClosedWrite, "checkpoint-30/trainer_state.json"))
      << Describe(after);
  EXPECT_EQ(watcher_->watched_dirs(), 2u);
}

TEST_F(InotifyWatcherTest, IgnoredPathsAreNeitherWatchedNorReported) {
  dir_.WriteFile(".spotguard-staging/capture-1/a", "a");
  Open([](std::string_view rel) { return rel.starts_with(".spotguard"); });
  EXPECT_EQ(watcher_->watched_dirs(), 1u);
  dir_.WriteFile(".spotguard-staging/capture-1/b", "b");
  dir_.WriteFile(".spotguard-other", "c");
  dir_.WriteFile("kept", "d");
  auto events = Read();
  for (const WatchEvent& e : events) EXPECT_FALSE(e.path.starts_with(".spotguard")) << e.path;
  EXPECT_TRUE(Has(events, Kind::kClosedWrite, "kept"));
}

TEST_F(InotifyWatcherTest, OverflowIsReportedAndWatchingGoesOn) {
  Open();
  // Alternate between two files so the kernel cannot merge the events, and
  // create directories meanwhile that must be watched after the overflow.
  const int a = ::open(dir_.Join("a").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  const int b = ::open(dir_.Join("b").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  int queue_limit = 16384;
  std::ifstream("/proc/sys/fs/inotify/max_queued_events") >> queue_limit;
  const int writes = queue_limit + 4000;
  for (int i = 0; i < writes; ++i) {
    ASSERT_EQ(::write(i % 2 ? a : b, "x", 1), 1);
    if (i == writes - 1000) std::filesystem::create_directories(dir_.Join("late/deeper"));
  }
  ::close(a);
  ::close(b);
  auto events = Read();
  EXPECT_TRUE(Has(events, Kind::kOverflow, "")) << events.size() << " events";
  EXPECT_EQ(watcher_->watched_dirs(), 3u);
  dir_.WriteFile("late/deeper/c", "c");
  auto after = Read();
  EXPECT_TRUE(Has(after, Kind::kClosedWrite, "late/deeper/c")) << Describe(after);
}

TEST_F(InotifyWatcherTest, DescriptorIsNonBlockingCloseOnExecAndPollable) {
  Open();
  const int flags = ::fcntl(watcher_->fd(), F_GETFD);
  EXPECT_TRUE(flags & FD_CLOEXEC);
  EXPECT_TRUE(::fcntl(watcher_->fd(), F_GETFL) & O_NONBLOCK);
  auto idle = watcher_->WaitReadable(milliseconds(20));
  ASSERT_TRUE(idle.ok());
  EXPECT_FALSE(*idle);
  dir_.WriteFile("x", "x");
  auto ready = watcher_->WaitReadable(milliseconds(1000));
  ASSERT_TRUE(ready.ok());
  EXPECT_TRUE(*ready);
}

TEST_F(InotifyWatcherTest, RefusesWhatIsNotADirectory) {
  dir_.WriteFile("file", "x");
  EXPECT_TRUE(InotifyWatcher::Open(dir_.Join("file")).status().Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(InotifyWatcher::Open(dir_.Join("missing")).status().Is(StatusCode::kNotFound));
}

}  // namespace
}  // namespace sg
