// The backups a group node's restores leave beside its checkpoint dir
// (agent/repo/round_backups.h): the marked ones beyond the newest few go;
// unmarked ones, and anything else beside the dir, stay.
#include "agent/repo/round_backups.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/files.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

namespace fs = std::filesystem;

TEST(RoundBackups, OnlyMarkedBackupsBeyondTheNewestFewArePruned) {
  TempDir dir;
  const std::string ckpt = dir.Join("ckpt");
  fs::create_directories(ckpt);
  int order = 0;
  const std::vector<std::string> stamps = {"20261129T100000Z", "20261129T110000Z",
                                           "20261129T120000Z", "20261129T130000Z"};
  for (const std::string& stamp : stamps) {
    const std::string backup = ckpt + ".spotguard-backup-" + stamp;
    fs::create_directories(backup + "/step_5");
    ASSERT_TRUE(WriteFileAtomic(backup + "/step_5/model.pt", "weights").ok());
    ASSERT_TRUE(MarkRoundBackup(backup, "round").ok());
    // Marked an hour apart, in the order of the names.
    fs::last_write_time(backup + "/" + kRoundBackupMark,
                        fs::file_time_type::clock::now() - std::chrono::hours(10 - order));
    ++order;
  }
  // A backup made by `spotguard restore --force` by hand, older than all.
  fs::create_directories(ckpt + ".spotguard-backup-20261129T090000Z");
  // Another dir's backup, and a file of the same shape.
  fs::create_directories(dir.Join("other.spotguard-backup-20261129T080000Z"));
  ASSERT_TRUE(MarkRoundBackup(dir.Join("other.spotguard-backup-20261129T080000Z"), "r").ok());
  ASSERT_TRUE(WriteFileAtomic(ckpt + ".spotguard-backup-20261129T070000Z", "a file").ok());

  auto removed = PruneRoundBackups(ckpt + "/", 2);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, (std::vector<std::string>{ckpt + ".spotguard-backup-20261129T100000Z",
                                                ckpt + ".spotguard-backup-20261129T110000Z"}));
  EXPECT_FALSE(fs::exists(ckpt + ".spotguard-backup-20261129T110000Z"));
  EXPECT_TRUE(fs::exists(ckpt + ".spotguard-backup-20261129T120000Z/step_5/model.pt"));
  EXPECT_TRUE(fs::exists(ckpt + ".spotguard-backup-20261129T130000Z"));
  EXPECT_TRUE(fs::exists(ckpt + ".spotguard-backup-20261129T090000Z")) << "unmarked: kept";
  EXPECT_TRUE(fs::exists(dir.Join("other.spotguard-backup-20261129T080000Z")));
  EXPECT_TRUE(fs::exists(ckpt + ".spotguard-backup-20261129T070000Z"));
  EXPECT_TRUE(fs::exists(ckpt));

  auto again = PruneRoundBackups(ckpt, 2);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
}

}  // namespace
}  // namespace sg::testing
