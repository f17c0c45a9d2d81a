// The restore marker (agent/repo/restore_marker.h): which files of a directory an
// earlier restore put there, looked up by path; and what a restore says
// about the backup dir it leaves (agent/repo/restore_placement.h).
#include "agent/repo/restore_marker.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "agent/repo/restore_placement.h"
#include "common/files.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

struct stat Lstat(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st;
}

TEST(RestoreMarker, FindsEveryRecordedPathAndNoOther) {
  TempDir dir;
  dir.WriteFile("d/a.pt", "a");
  dir.WriteFile("d/sub/b.pt", "bb");
  dir.WriteFile("d/sub/deeper/c.pt", "ccc");
  ASSERT_TRUE(
      WriteRestoreMarker(dir.Join("d"), "1-x", 7, {"a.pt", "sub/b.pt", "sub/deeper/c.pt"}).ok());
  auto marker = ReadRestoreMarker(dir.Join("d"));
  ASSERT_TRUE(marker.has_value());
  EXPECT_EQ(marker->id, "1-x");
  EXPECT_EQ(marker->seq, 7u);
  ASSERT_EQ(marker->files.size(), 3u);
  for (const std::string rel : {"a.pt", "sub/b.pt", "sub/deeper/c.pt"}) {
    const struct stat st = Lstat(dir.Join("d/" + rel));
    const RestoreMarker::File* f = marker->Find(rel);
    ASSERT_NE(f, nullptr) << rel;
    EXPECT_EQ(f->inode, static_cast<uint64_t>(st.st_ino)) << rel;
    EXPECT_EQ(f->size, static_cast<uint64_t>(st.st_size)) << rel;
    EXPECT_TRUE(marker->Owns(rel, st)) << rel;
  }
  for (const std::string other : {"", "a", "a.pt/", "A.pt", "sub", "sub/", "b.pt", "sub/b",
                                  "sub/deeper", "./a.pt", "sub//b.pt"}) {
    EXPECT_EQ(marker->Find(other), nullptr) << "'" << other << "'";
  }
  // A file rewritten since, or another file renamed over it, is not restore's.
  dir.WriteFile("d/a.pt", "rewritten");
  EXPECT_FALSE(marker->Owns("a.pt", Lstat(dir.Join("d/a.pt"))));
  dir.WriteFile("d/other", "bb");
  std::filesystem::rename(dir.Join("d/other"), dir.Join("d/sub/b.pt"));
  EXPECT_FALSE(marker->Owns("sub/b.pt", Lstat(dir.Join("d/sub/b.pt"))));
  // A directory of that name is not the file.
  EXPECT_FALSE(marker->Owns("sub/deeper/c.pt", Lstat(dir.Join("d/sub"))));
}

TEST(RestoreMarker, APathListedTwiceCountsAsFirstListed) {
  TempDir dir;
  const nlohmann::json j = {{"id", "1-x"},
                            {"seq", 1},
                            {"files",
                             {{{"path", "a.pt"}, {"inode", 11}, {"size", 1}, {"mtime_ns", 5}},
                              {{"path", "a.pt"}, {"inode", 22}, {"size", 2}, {"mtime_ns", 6}}}}};
  dir.WriteFile(std::string("d/") + kRestoreMarkerName, j.dump());
  auto marker = ReadRestoreMarker(dir.Join("d"));
  ASSERT_TRUE(marker.has_value());
  ASSERT_NE(marker->Find("a.pt"), nullptr);
  EXPECT_EQ(marker->Find("a.pt")->inode, 11u);
  EXPECT_EQ(marker->Find("a.pt")->size, 1u);
}

TEST(RestoreMarker, AMarkerOfManyFilesFindsEachOfThem) {
  TempDir dir;
  nlohmann::json files = nlohmann::json::array();
  constexpr int kFiles = 50'000;
  for (int i = 0; i < kFiles; ++i) {
    files.push_back({{"path", "shard_" + std::to_string(i % 100) + "/part_" + std::to_string(i)},
                     {"inode", 1000 + i},
                     {"size", i},
                     {"mtime_ns", 7}});
  }
  dir.WriteFile(std::string("d/") + kRestoreMarkerName,
                nlohmann::json{{"id", "1-x"}, {"seq", 1}, {"files", files}}.dump());
  auto marker = ReadRestoreMarker(dir.Join("d"));
  ASSERT_TRUE(marker.has_value());
  ASSERT_EQ(marker->files.size(), static_cast<size_t>(kFiles));
  int found = 0;
  for (int i = 0; i < kFiles; ++i) {
    const RestoreMarker::File* f =
        marker->Find("shard_" + std::to_string(i % 100) + "/part_" + std::to_string(i));
    if (f != nullptr && f->inode == static_cast<uint64_t>(1000 + i)) ++found;
  }
  EXPECT_EQ(found, kFiles);
  EXPECT_EQ(marker->Find("shard_1/part_2"), nullptr);
}

TEST(RestoreMarker, AnUnreadableMarkerOwnsNothing) {
  TempDir dir;
  dir.WriteFile(std::string("d/") + kRestoreMarkerName,
                R"({"id": "1-x", "seq": 1, "files": [{"path": 3}]})");
  EXPECT_FALSE(ReadRestoreMarker(dir.Join("d")).has_value());
  dir.WriteFile(std::string("e/") + kRestoreMarkerName, "not json");
  EXPECT_FALSE(ReadRestoreMarker(dir.Join("e")).has_value());
}

// Issue 32: "kept 0 file(s) ... (e.g. ?)" after a restore whose old contents
// held a mount point.
TEST(DescribeBackup, NeverSaysZeroFilesOrNamesNothing) {
  const std::string t = "/ckpt", b = "/ckpt.spotguard-backup-x";
  EXPECT_EQ(DescribeBackup({"last.pt", "opt.pt"}, {}, t, b),
            "2 file(s) of /ckpt that the snapshot replaced (e.g. last.pt) are kept in " + b);
  EXPECT_EQ(DescribeBackup({}, {"data/ (a mount point, left untouched)"}, t, b),
            "1 entry of the previous contents of /ckpt that could not be settled (e.g. data/ (a "
            "mount point, left untouched)) are kept in " +
                b);
  EXPECT_EQ(DescribeBackup({"last.pt"}, {"x (Permission denied)", "y"}, t, b),
            "1 file(s) of /ckpt that the snapshot replaced (e.g. last.pt) and 2 entries of the "
            "previous contents of /ckpt that could not be settled (e.g. x (Permission denied)) "
            "are kept in " +
                b);
  EXPECT_EQ(DescribeBackup({}, {}, t, b), "the previous contents of /ckpt are kept in " + b);
  for (const std::string& text : {DescribeBackup({}, {}, t, b), DescribeBackup({}, {"y"}, t, b)}) {
    EXPECT_EQ(text.find(" 0 "), std::string::npos) << text;
    EXPECT_EQ(text.find('?'), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace sg::testing
