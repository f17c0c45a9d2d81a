#include "agent/detect/checkpoint_watcher.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/files.h"
#include "tests/support/fake_clock.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Strings = std::set<std::string>;

constexpr seconds kSettle(10);

class CheckpointWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }
  void Start() {
    auto w = CheckpointWatcher::Start(dir_.path(), kSettle, clock_);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    watcher_ = std::move(*w);
  }
  std::set<std::string> Unsettled() {
    EXPECT_TRUE(watcher_->Poll().ok());
    return watcher_->Unsettled();
  }
  std::vector<std::string> Complete() {
    auto cs = watcher_->CompleteCheckpoints(detector_);
    EXPECT_TRUE(cs.ok()) << cs.status().ToString();
    std::vector<std::string> ids;
    if (cs.ok()) {
      for (const Checkpoint& c : *cs) ids.push_back(c.id);
    }
    return ids;
  }
  // Sets a file's mtime relative to the fake clock's wall time.
  void SetMtime(const std::string& rel, std::chrono::nanoseconds from_now) {
    const auto t =
        std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.Now().time_since_epoch()) +
        from_now;
    struct timespec times[2];
    times[0].tv_sec = times[1].tv_sec = t.count() / 1'000'000'000;
    times[0].tv_nsec = times[1].tv_nsec = t.count() % 1'000'000'000;
    ASSERT_EQ(::utimensat(AT_FDCWD, dir_.Join(rel).c_str(), times, 0), 0);
  }

  testing::TempDir dir_;
  testing::FakeClock clock_;
  CheckpointDetector detector_{dir_.path(), Preset::kPytorch, {"*.pt"}};
  std::unique_ptr<CheckpointWatcher> watcher_;
};

// `spotguard snapshot` right after the trainer wrote: the checkpoint still
// settling is waited for (one settle time on the fake clock), not refused; a
// dir with nothing settling is answered at once.
TEST_F(CheckpointWatcherTest, ACommandRightAfterAWriteWaitsForTheCheckpointToSettle) {
  ASSERT_TRUE(WriteFileAtomic(dir_.Join("step_5.pt"), "weights").ok());
  SetMtime("step_5.pt", milliseconds(-10));
  auto now = DetectSettledNow(detector_, kSettle, clock_);
  ASSERT_TRUE(now.ok());
  EXPECT_TRUE(now->empty()) << "still settling";
  const auto before = clock_.Monotonic();
  auto settled = DetectOnceSettled(detector_, kSettle, clock_);
  ASSERT_TRUE(settled.ok()) << settled.status().ToString();
  ASSERT_EQ(settled->size(), 1u);
  EXPECT_EQ(settled->front().id, "step_5.pt");
  EXPECT_EQ(clock_.Monotonic() - before, kSettle) << "one settle time waited";

  testing::TempDir empty;
  const CheckpointDetector none{empty.path(), Preset::kPytorch, {"*.pt"}};
  const auto at = clock_.Monotonic();
  auto nothing = DetectOnceSettled(none, kSettle, clock_);
  ASSERT_TRUE(nothing.ok());
  EXPECT_TRUE(nothing->empty());
  EXPECT_EQ(clock_.Monotonic(), at) << "nothing settling: no wait";
}

TEST_F(CheckpointWatcherTest, FileOpenForWritingNeverSettlesUntilClosed) {
  const int fd = ::open(dir_.Join("a.pt").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "abc", 3), 3);
  EXPECT_EQ(Unsettled(), (Strings{"a.pt"}));
  clock_.Advance(seconds(60));
  EXPECT_EQ(Unsettled(), (Strings{"a.pt"}));
  EXPECT_EQ(watcher_->NextSettle(), std::nullopt);  // not before its close
  EXPECT_TRUE(Complete().empty());
  ::close(fd);
  EXPECT_EQ(Unsettled(), (Strings{"a.pt"}));
  EXPECT_EQ(watcher_->NextSettle(), clock_.Monotonic() + kSettle);
  clock_.Advance(kSettle - milliseconds(1));
  EXPECT_EQ(Unsettled(), (Strings{"a.pt"}));
  clock_.Advance(milliseconds(1));
  EXPECT_TRUE(Unsettled().empty());
  EXPECT_EQ(Complete(), (std::vector<std::string>{"a.pt"}));
}

TEST_F(CheckpointWatcherTest, FileAlreadyOpenForWritingAtStartWaitsForItsClose) {
  watcher_.reset();
  const int fd = ::open(dir_.Join("early.pt").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "abc", 3), 3);
  SetMtime("early.pt", -seconds(3600));  // quiet for an hour, but still open
  Start();
  EXPECT_EQ(Unsettled(), (Strings{"early.pt"}));
  clock_.Advance(seconds(60));
  EXPECT_TRUE(Complete().empty());
  ::close(fd);
  EXPECT_EQ(Unsettled(), (Strings{"early.pt"}));  // closed just now
  clock_.Advance(kSettle);
  EXPECT_EQ(Complete(), (std::vector<std::string>{"early.pt"}));
}

TEST_F(CheckpointWatcherTest, RenamedInFileSettlesAfterTheSettleTime) {
  dir_.WriteFile("elsewhere/b.pt", "b");
  SetMtime("elsewhere/b.pt", -seconds(3600));  // written long ago
  EXPECT_EQ(Unsettled(), (Strings{"elsewhere/b.pt"}));
  clock_.Advance(seconds(60));
  EXPECT_TRUE(Unsettled().empty());
  std::filesystem::rename(dir_.Join("elsewhere/b.pt"), dir_.Join("b.pt"));
  EXPECT_EQ(Unsettled(), (Strings{"b.pt"}));
  EXPECT_TRUE(Complete().empty());
  clock_.Advance(kSettle);
  EXPECT_EQ(Complete(), (std::vector<std::string>{"b.pt"}));
}

// Once the agent asked for a checkpoint, the settle time must not eat the
// notice's budget: a closed file is complete after a short quiet time.
TEST_F(CheckpointWatcherTest, WhenUrgentAClosedFileIsCompleteAfterTheShortQuietTime) {
  const int fd = ::open(dir_.Join("a.pt").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "abc", 3), 3);
  watcher_->SetUrgent(true);
  clock_.Advance(seconds(60));
  EXPECT_TRUE(Complete().empty()) << "still open for writing";
  ::close(fd);
  EXPECT_TRUE(Complete().empty()) << "closed just now";
  EXPECT_EQ(watcher_->NextSettle(), clock_.Monotonic() + CheckpointWatcher::kUrgentSettle);
  clock_.Advance(CheckpointWatcher::kUrgentSettle);
  EXPECT_EQ(Complete(), (std::vector<std::string>{"a.pt"}));
  ASSERT_LT(CheckpointWatcher::kUrgentSettle, kSettle);
}

TEST_F(CheckpointWatcherTest, WhenUrgentARenamedInFileIsCompleteAfterTheShortQuietTime) {
  dir_.WriteFile("elsewhere/b.pt", "b");
  SetMtime("elsewhere/b.pt", -seconds(3600));
  EXPECT_EQ(Unsettled(), (Strings{"elsewhere/b.pt"}));
  clock_.Advance(seconds(60));
  EXPECT_TRUE(Unsettled().empty());
  std::filesystem::rename(dir_.Join("elsewhere/b.pt"), dir_.Join("b.pt"));
  EXPECT_EQ(Unsettled(), (Strings{"b.pt"}));  // renamed in just now
  clock_.Advance(CheckpointWatcher::kUrgentSettle);
  EXPECT_TRUE(Complete().empty()) << "not urgent: the whole settle time";
  watcher_->SetUrgent(true);
  EXPECT_EQ(Complete(), (std::vector<std::string>{"b.pt"}));
  watcher_->SetUrgent(false);
  dir_.WriteFile("c.pt", "c");
  SetMtime("c.pt", -seconds(3600));
  EXPECT_EQ(Unsettled(), (Strings{"c.pt"}));
  clock_.Advance(CheckpointWatcher::kUrgentSettle);
  EXPECT_EQ(Complete(), (std::vector<std::string>{"b.pt"})) << "c.pt settles in full again";
}

TEST_F(CheckpointWatcherTest, RecentlyModifiedFilesSeenOnlyByListingAreSettling) {
  // Written before the watcher started: only the mtime tells.
  dir_.WriteFile("old.pt", "o");
  dir_.WriteFile("new.pt", "n");
  SetMtime("old.pt", -seconds(30));
  SetMtime("new.pt", -seconds(4));
  watcher_.reset();
  Start();
  EXPECT_EQ(Complete(), (std::vector<std::string>{"old.pt"}));
  EXPECT_EQ(watcher_->NextSettle(), clock_.Monotonic() + seconds(6));
  clock_.Advance(seconds(6));
  EXPECT_EQ(Complete(), (std::vector<std::string>{"new.pt", "old.pt"}));
}

TEST_F(CheckpointWatcherTest, AQuietDirectoryIsListedAgainOnlyAfterAnEventOrASecond) {
  dir_.WriteFile("a.pt", "a");
  SetMtime("a.pt", -seconds(60));
  watcher_.reset();
  Start();
  EXPECT_EQ(Complete(), (std::vector<std::string>{"a.pt"}));
  EXPECT_EQ(watcher_->listings(), 1u);
  // No event, nothing settling: the same answer, without a listing.
  clock_.Advance(milliseconds(500));
  EXPECT_EQ(Complete(), (std::vector<std::string>{"a.pt"}));
  EXPECT_EQ(watcher_->listings(), 1u);
  // A change no event reports (an mtime set by hand) is seen once
  // kRelistAfter passed since the listing.
  SetMtime("a.pt", -seconds(1));
  EXPECT_EQ(Complete(), (std::vector<std::string>{"a.pt"}));
  clock_.Advance(CheckpointWatcher::kRelistAfter - milliseconds(500));
  EXPECT_TRUE(Complete().empty()) << "a.pt's mtime says it is settling";
  EXPECT_EQ(watcher_->listings(), 2u);
  // While a file settles, every look lists.
  EXPECT_TRUE(Complete().empty());
  EXPECT_EQ(watcher_->listings(), 3u);
  clock_.Advance(kSettle);
  EXPECT_EQ(Complete(), (std::vector<std::string>{"a.pt"}));
  EXPECT_EQ(watcher_->listings(), 4u);
  // An event: listed at once.
  dir_.WriteFile("b.pt", "b");
  EXPECT_EQ(Complete(), (std::vector<std::string>{"a.pt"})) << "b.pt settles";
  EXPECT_EQ(watcher_->listings(), 5u);
  clock_.Advance(kSettle);
  EXPECT_EQ(Complete().size(), 2u);
  EXPECT_EQ(watcher_->listings(), 6u);
  // Another detector, or Relist (the detector's settings changed): listed again.
  CheckpointDetector other{dir_.path(), Preset::kPytorch, {"b.pt"}};
  auto only_b = watcher_->CompleteCheckpoints(other);
  ASSERT_TRUE(only_b.ok());
  EXPECT_EQ(only_b->size(), 1u);
  EXPECT_EQ(watcher_->listings(), 7u);
  EXPECT_EQ(Complete().size(), 2u);
  EXPECT_EQ(watcher_->listings(), 8u);
  watcher_->Relist();
  EXPECT_EQ(Complete().size(), 2u);
  EXPECT_EQ(watcher_->listings(), 9u);
}

TEST_F(CheckpointWatcherTest, DirectoryRenamedInSettlesAsAWhole) {
  dir_.WriteFile("tmp-x/step_5/model.pt", "m");
  SetMtime("tmp-x/step_5/model.pt", -seconds(3600));
  EXPECT_EQ(Unsettled(), (Strings{"tmp-x/step_5/model.pt"}));
  clock_.Advance(seconds(60));
  EXPECT_TRUE(Unsettled().empty());
  std::filesystem::create_directories(dir_.Join("run"));
  std::filesystem::rename(dir_.Join("tmp-x"), dir_.Join("run/x"));
  EXPECT_EQ(Unsettled(), (Strings{"run/x/step_5/model.pt"}));
  clock_.Advance(kSettle);
  EXPECT_EQ(Complete(), (std::vector<std::string>{"run/x/step_5"}));
}

TEST_F(CheckpointWatcherTest, DeletedFilesAreForgotten) {
  dir_.WriteFile("gone/c.pt", "c");
  EXPECT_EQ(Unsettled(), (Strings{"gone/c.pt"}));
  std::filesystem::remove_all(dir_.Join("gone"));
  EXPECT_TRUE(Unsettled().empty());
}

TEST_F(CheckpointWatcherTest, StagingInsideTheCheckpointDirIsIgnored) {
  dir_.WriteFile(".spotguard-staging/capture-1/a.pt", "a");
  EXPECT_TRUE(Unsettled().empty());
  SetMtime(".spotguard-staging/capture-1/a.pt", -seconds(3600));
  EXPECT_TRUE(Complete().empty());
}

TEST_F(CheckpointWatcherTest, WaitForNewerReturnsOnceTheCheckpointSettles) {
  dir_.WriteFile("step_1.pt", "1");
  EXPECT_EQ(Unsettled(), (Strings{"step_1.pt"}));
  clock_.Advance(kSettle);
  auto first = watcher_->CompleteCheckpoints(detector_);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  const CheckpointMark mark = CheckpointMark::Of((*first)[0]);

  dir_.WriteFile("step_2.pt", "2");
  const auto start = clock_.Monotonic();
  auto found = watcher_->WaitForNewer(detector_, mark, start + seconds(120));
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->id, "step_2.pt");
  EXPECT_GE(clock_.Monotonic() - start, kSettle);
  EXPECT_LT(clock_.Monotonic() - start, kSettle + seconds(1));
}

TEST_F(CheckpointWatcherTest, WaitForNewerGivesUpAtTheDeadline) {
  const auto start = clock_.Monotonic();
  auto found = watcher_->WaitForNewer(detector_, std::nullopt, start + seconds(30));
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->has_value());
  EXPECT_GE(clock_.Monotonic(), start + seconds(30));
}

TEST(RecentlyModified, CountsMtimesWithinTheSettleTimeEitherSide) {
  const auto now = std::chrono::system_clock::time_point(seconds(1'800'000'000));
  std::vector<ListedFile> files(4);
  files[0].relpath = "old";
  files[0].mtime = now - seconds(11);
  files[1].relpath = "recent";
  files[1].mtime = now - seconds(9);
  files[2].relpath = "future";
  files[2].mtime = now + seconds(9);
  files[3].relpath = "far-future";
  files[3].mtime = now + seconds(3600);
  EXPECT_EQ(RecentlyModified(files, now, kSettle), (Strings{"future", "recent"}));
}

}  // namespace
}  // namespace sg
