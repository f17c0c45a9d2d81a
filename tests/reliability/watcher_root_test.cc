// The checkpoint dir itself deleted or moved away under the watcher: the
// loss is reported once, nothing is found (no error, no empty checkpoint)
// while it is gone, and the directory made again at the same path is
// watched again.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "agent/detect/checkpoint_watcher.h"
#include "common/inotify_watcher.h"
#include "tests/support/fake_clock.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

using namespace std::chrono_literals;

std::vector<WatchEvent::Kind> Kinds(InotifyWatcher& w) {
  auto events = w.ReadEvents();
  EXPECT_TRUE(events.ok()) << events.status().ToString();
  std::vector<WatchEvent::Kind> kinds;
  if (events.ok()) {
    for (const WatchEvent& e : *events) kinds.push_back(e.kind);
  }
  return kinds;
}

bool Has(const std::vector<WatchEvent::Kind>& kinds, WatchEvent::Kind k) {
  return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
}

TEST(WatcherRoot, ADeletedRootIsReportedAndWatchedAgainWhenMadeAgain) {
  TempDir dir;
  const std::string root = dir.Join("ckpt");
  std::filesystem::create_directories(root + "/sub");
  auto w = InotifyWatcher::Open(root);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::filesystem::remove_all(root);
  const auto kinds = Kinds(**w);
  EXPECT_TRUE(Has(kinds, WatchEvent::Kind::kRootGone));
  EXPECT_TRUE((*w)->root_gone());
  EXPECT_EQ((*w)->watched_dirs(), 0u);
  EXPECT_FALSE(*(*w)->Rewatch()) << "nothing to watch yet";
  std::filesystem::create_directories(root + "/again");
  ASSERT_TRUE(*(*w)->Rewatch());
  EXPECT_FALSE((*w)->root_gone());
  EXPECT_EQ((*w)->watched_dirs(), 2u);
  std::ofstream(root + "/again/x") << "x";
  const auto after = Kinds(**w);
  EXPECT_TRUE(Has(after, WatchEvent::Kind::kCreated));
  EXPECT_TRUE(Has(after, WatchEvent::Kind::kClosedWrite));
}

TEST(WatcherRoot, ARootMovedAwayIsGoneAndItsNewPlaceIsNotWatched) {
  TempDir dir;
  const std::string root = dir.Join("ckpt");
  std::filesystem::create_directories(root);
  auto w = InotifyWatcher::Open(root);
  ASSERT_TRUE(w.ok());
  std::filesystem::rename(root, dir.Join("moved"));
  EXPECT_TRUE(Has(Kinds(**w), WatchEvent::Kind::kRootGone));
  std::ofstream(dir.Join("moved/y")) << "y";
  EXPECT_TRUE(Kinds(**w).empty()) << "files of the moved dir are not under the root";
}

TEST(WatcherRoot, CheckpointWatcherFindsNothingWhileGoneAndCheckpointsAfter) {
  TempDir dir;
  FakeClock clock;
  clock.SetNow(std::chrono::system_clock::now());
  const std::string root = dir.Join("ckpt");
  std::filesystem::create_directories(root);
  auto w = CheckpointWatcher::Start(root, 1s, clock);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  CheckpointDetector detector{root, Preset::kGeneric, {"step_*.ckpt"}};
  std::ofstream(root + "/step_000001.ckpt") << "1";
  clock.Advance(5s);
  auto found = (*w)->CompleteCheckpoints(detector);
  ASSERT_TRUE(found.ok());
  ASSERT_EQ(found->size(), 1u);

  std::filesystem::remove_all(root);
  for (int i = 0; i < 3; ++i) {
    auto none = (*w)->CompleteCheckpoints(detector);
    ASSERT_TRUE(none.ok()) << "a missing dir is not an error: " << none.status().ToString();
    EXPECT_TRUE(none->empty());
  }
  EXPECT_TRUE((*w)->dir_gone());
  EXPECT_EQ((*w)->root_losses(), 1u);

  std::filesystem::create_directories(root);
  clock.SetNow(std::chrono::system_clock::now());  // the new file's mtime is now
  std::ofstream(root + "/step_000002.ckpt") << "2";
  auto fresh = (*w)->CompleteCheckpoints(detector);
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(fresh->empty()) << "just written: still settling";
  EXPECT_FALSE((*w)->dir_gone());
  clock.Advance(5s);
  auto settled = (*w)->CompleteCheckpoints(detector);
  ASSERT_TRUE(settled.ok());
  ASSERT_EQ(settled->size(), 1u);
  EXPECT_EQ(settled->front().id, "step_000002.ckpt");
}

}  // namespace
}  // namespace sg::testing
