// The restore rule (docs/design.md): a restore never deletes or overwrites a
// file it did not put there, and the target is still the old checkpoint or
// the whole new one. Also the manifest checks that keep a hostile or empty
// manifest from doing harm.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include "agent/repo/manifest.h"
#include "agent/repo/restore_placement.h"
#include "agent/repo/restorer.h"
#include "agent/repo/snapshot_writer.h"
#include "common/file_store.h"
#include "common/files.h"
#include "tests/support/file_store_fixture.h"

namespace sg::testing {
namespace {

namespace fs = std::filesystem;

class RestoreRuleTest : public FileStoreTest {
 protected:
  uint64_t Snapshot(const Tree& tree) {
    SnapshotRequest req;
    req.preset = "generic";
    auto r = CommitTree(tree, req);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->seq : 0;
  }

  StatusOr<RestoreResult> Restore(const std::string& to, bool force = false) {
    RestoreOptions options;
    options.replace_foreign = force;
    Restorer restorer(*store_, options);
    return restorer.Restore("job", dir_.Join(to), std::nullopt);
  }

  // Entries beside the target whose names say they are leftovers of a restore.
  std::vector<std::string> Leftovers() {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_.path())) {
      const std::string name = e.path().filename().string();
      if (name.find("spotguard-restore") != std::string::npos) out.push_back(name);
    }
    return out;
  }
};

// The reproduction of the defect: dotfiles, code and keys in the target.
TEST_F(RestoreRuleTest, RestoreKeepsEveryFileItDidNotPutThere) {
  Snapshot({{"step_200.pt", {"weights", 0644}}});
  const Tree mine = {{".ssh/id_rsa", {"k", 0600}},     {"code/main.py", {"c", 0644}},
                     {".bashrc", {"b", 0644}},         {"runs/events.out", {"log", 0644}},
                     {"tokenizer.json", {"{}", 0644}}, {"step_100.pt", {"older", 0644}}};
  WriteTree(dir_.Join("d"), mine);
  auto r = Restore("d");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Tree want = mine;
  want["step_200.pt"] = {"weights", 0644};
  EXPECT_EQ(ReadTree(dir_.Join("d")), want);
  EXPECT_EQ(r->kept_foreign, 6u);
  EXPECT_TRUE(r->backup_dir.empty());
  EXPECT_TRUE(Leftovers().empty());
}

TEST_F(RestoreRuleTest, KeptFilesAreTheSameFilesNotCopies) {
  Snapshot({{"new.pt", {"n", 0644}}});
  WriteTree(dir_.Join("d"), {{"logs/train.log", {"line\n", 0644}}});
  struct stat before {};
  ASSERT_EQ(::stat(dir_.Join("d/logs/train.log").c_str(), &before), 0);
  ASSERT_TRUE(Restore("d").ok());
  struct stat after {};
  ASSERT_EQ(::stat(dir_.Join("d/logs/train.log").c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);  // a writer holding it open keeps writing to it
  EXPECT_EQ(after.st_nlink, 1u);           // and no second name is left anywhere
}

TEST_F(RestoreRuleTest, ForeignFileOfTheSameNameIsRefusedWithoutForce) {
  Snapshot({{"last.pt", {"store", 0644}}});
  WriteTree(dir_.Join("d"), {{"last.pt", {"local", 0644}}, {"notes.txt", {"n", 0644}}});
  auto r = Restore("d");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "ForeignFiles");
  EXPECT_NE(r.status().message().find("last.pt"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("--force"), std::string::npos);
  EXPECT_EQ(ReadTree(dir_.Join("d")),
            (Tree{{"last.pt", {"local", 0644}}, {"notes.txt", {"n", 0644}}}));
  EXPECT_TRUE(Leftovers().empty());
}

TEST_F(RestoreRuleTest, ForceKeepsTheReplacedFileInANamedBackup) {
  Snapshot({{"last.pt", {"store", 0644}}, {"sub/x", {"x", 0644}}});
  WriteTree(dir_.Join("d"), {{"last.pt", {"local", 0644}}, {"sub", {"a file", 0644}}});
  auto r = Restore("d", /*force=*/true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadTree(dir_.Join("d")), (Tree{{"last.pt", {"store", 0644}}, {"sub/x", {"x", 0644}}}));
  ASSERT_FALSE(r->backup_dir.empty());
  EXPECT_TRUE(r->backup_dir.starts_with(dir_.Join("d.spotguard-backup-"))) << r->backup_dir;
  EXPECT_EQ(ReadTree(r->backup_dir),
            (Tree{{"last.pt", {"local", 0644}}, {"sub", {"a file", 0644}}}));
}

TEST_F(RestoreRuleTest, ARestoreReplacesOnlyWhatAnEarlierRestorePutThere) {
  Snapshot({{"a.pt", {"one", 0644}}, {"shared.json", {"v1", 0644}}});
  ASSERT_TRUE(Restore("d").ok());
  // The trainer rewrites one restored file and adds its own.
  ASSERT_TRUE(WriteFileAtomic(dir_.Join("d/shared.json"), "edited").ok());
  WriteTree(dir_.Join("d"), {{"b.log", {"mine", 0644}}});
  Snapshot({{"c.pt", {"three", 0644}}});
  auto r = Restore("d");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // a.pt was restore's and unchanged: it goes. shared.json is the trainer's now.
  EXPECT_EQ(ReadTree(dir_.Join("d")), (Tree{{"b.log", {"mine", 0644}},
                                            {"c.pt", {"three", 0644}},
                                            {"shared.json", {"edited", 0644}}}));
}

TEST_F(RestoreRuleTest, RestoringTheSameSnapshotAgainNeedsNoForce) {
  Snapshot({{"last.pt", {"w", 0644}}});
  ASSERT_TRUE(Restore("d").ok());
  auto again = Restore("d");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ReadTree(dir_.Join("d")), (Tree{{"last.pt", {"w", 0644}}}));
  EXPECT_TRUE(again->backup_dir.empty());
}

TEST_F(RestoreRuleTest, AnEmptyForeignDirectoryStays) {
  Snapshot({{"w.pt", {"w", 0644}}});
  fs::create_directories(dir_.Join("d/empty/inner"));
  ASSERT_TRUE(Restore("d").ok());
  EXPECT_TRUE(fs::is_directory(dir_.Join("d/empty/inner")));
}

TEST_F(RestoreRuleTest, SymlinksAndFifosInTheTargetAreKept) {
  Snapshot({{"w.pt", {"w", 0644}}});
  WriteTree(dir_.Join("d"), {{"data.bin", {"d", 0644}}});
  fs::create_symlink("data.bin", dir_.Join("d/link"));
  fs::create_symlink("/nonexistent/elsewhere", dir_.Join("d/dangling"));
  ASSERT_EQ(::mkfifo(dir_.Join("d/pipe").c_str(), 0600), 0);
  ASSERT_TRUE(Restore("d").ok());
  EXPECT_EQ(fs::read_symlink(dir_.Join("d/link")), "data.bin");
  EXPECT_EQ(fs::read_symlink(dir_.Join("d/dangling")), "/nonexistent/elsewhere");
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(dir_.Join("d/pipe"))));
  EXPECT_TRUE(fs::exists(dir_.Join("d/w.pt")));
}

// A restore killed after its swap leaves the target's previous contents in
// its temporary dir; the next restore must bring them back, not delete them.
TEST_F(RestoreRuleTest, ARestoreKilledAfterTheSwapLosesNothing) {
  Snapshot({{"w.pt", {"new", 0644}}});
  // What the killed restore left: the target holds its new files and marker,
  // the temporary dir (of a pid that no longer exists) the old contents.
  WriteTree(dir_.Join("d"), {{"w.pt", {"new", 0644}}});
  ASSERT_TRUE(WriteRestoreMarker(dir_.Join("d"), "999999-dead", 1, {"w.pt"}).ok());
  const std::string old = dir_.Join(".d.spotguard-restore-999999-dead");
  WriteTree(old, {{"notes.txt", {"precious", 0644}}, {"runs/ev", {"e", 0644}}});
  ASSERT_EQ(::kill(999999, 0), -1);  // no such process
  Snapshot({{"w.pt", {"newer", 0644}}});
  auto r = Restore("d");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadTree(dir_.Join("d")), (Tree{{"notes.txt", {"precious", 0644}},
                                            {"runs/ev", {"e", 0644}},
                                            {"w.pt", {"newer", 0644}}}));
  EXPECT_FALSE(fs::exists(old));
}

// A restore killed before its swap leaves only its own download (its marker
// names it) and links to the target's files: removing it loses nothing.
TEST_F(RestoreRuleTest, ARestoreKilledBeforeTheSwapIsRemoved) {
  Snapshot({{"w.pt", {"new", 0644}}});
  WriteTree(dir_.Join("d"), {{"notes.txt", {"precious", 0644}}});
  const std::string temp = dir_.Join(".d.spotguard-restore-999998-dead");
  WriteTree(temp, {{"w.pt", {"partial", 0644}}});
  ASSERT_TRUE(WriteRestoreMarker(temp, "999998-dead", 1, {}).ok());
  ASSERT_EQ(::link(dir_.Join("d/notes.txt").c_str(), (temp + "/notes.txt").c_str()), 0);
  auto r = Restore("d");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadTree(dir_.Join("d")),
            (Tree{{"notes.txt", {"precious", 0644}}, {"w.pt", {"new", 0644}}}));
  EXPECT_FALSE(fs::exists(temp));
}

// A restore killed while it settled the old contents: its own earlier files
// (named by the old marker, which settling removes last) are not brought back.
TEST_F(RestoreRuleTest, AnInterruptedSettleNeverBringsBackRestoresOwnFiles) {
  Snapshot({{"new.pt", {"new", 0644}}});
  WriteTree(dir_.Join("d"), {{"new.pt", {"new", 0644}}});
  ASSERT_TRUE(WriteRestoreMarker(dir_.Join("d"), "999997-new", 2, {"new.pt"}).ok());
  const std::string old = dir_.Join(".d.spotguard-restore-999997-new");
  WriteTree(old, {{"old.pt", {"restored earlier", 0644}}, {"notes.txt", {"mine", 0644}}});
  ASSERT_TRUE(WriteRestoreMarker(old, "111111-older", 1, {"old.pt"}).ok());
  auto r = Restore("d");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadTree(dir_.Join("d")),
            (Tree{{"new.pt", {"new", 0644}}, {"notes.txt", {"mine", 0644}}}));
  EXPECT_FALSE(fs::exists(old));
}

// A never-swapped temp dir whose removal was cut short keeps its marker to
// the end, so what is left of it is removed, never taken for old contents.
TEST_F(RestoreRuleTest, AHalfRemovedUnswappedTempDirIsStillRemoved) {
  Snapshot({{"w.pt", {"new", 0644}}});
  WriteTree(dir_.Join("d"), {{"notes.txt", {"mine", 0644}}});
  const std::string temp = dir_.Join(".d.spotguard-restore-999996-gone");
  WriteTree(temp, {{"optim/state.bin", {"partial", 0644}}});
  ASSERT_TRUE(WriteRestoreMarker(temp, "999996-gone", 1, {}).ok());
  auto r = Restore("d");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadTree(dir_.Join("d")),
            (Tree{{"notes.txt", {"mine", 0644}}, {"w.pt", {"new", 0644}}}));
  EXPECT_FALSE(fs::exists(temp));
  // And the removal itself takes the marker last.
  WriteTree(temp, {{"a/b", {"x", 0644}}, {"c", {"y", 0644}}});
  ASSERT_TRUE(WriteRestoreMarker(temp, "999996-gone", 1, {}).ok());
  ASSERT_TRUE(DiscardUnswappedRestoreDir(temp).ok());
  EXPECT_FALSE(fs::exists(temp));
}

TEST_F(RestoreRuleTest, ASymlinkOrFileTargetIsRefusedBeforeDownloading) {
  Snapshot({{"w.pt", {"w", 0644}}});
  fs::create_directories(dir_.Join("real"));
  fs::create_symlink(dir_.Join("real"), dir_.Join("link"));
  auto r = Restore("link");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("symlink"), std::string::npos) << r.status().message();
  EXPECT_TRUE(fs::is_symlink(dir_.Join("link")));
  WriteTree(dir_.path(), {{"plain", {"p", 0644}}});
  auto f = Restore("plain");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("not a directory"), std::string::npos);
  EXPECT_TRUE(Leftovers().empty());
}

// Hostile manifests (the store is not trusted).
class HostileManifestTest : public RestoreRuleTest {
 protected:
  // Rewrites snapshot `seq`'s manifest through `edit`.
  void EditManifest(uint64_t seq, const std::function<void(nlohmann::json&)>& edit) {
    const std::string path = dir_.Join("store/" + ManifestKey("job", seq));
    auto text = ReadFileToString(path);
    ASSERT_TRUE(text.ok());
    nlohmann::json j = nlohmann::json::parse(*text);
    edit(j);
    ASSERT_TRUE(WriteFileAtomic(path, j.dump()).ok());
  }
};

TEST_F(HostileManifestTest, ModeBitsBeyondPermissionsAreMaskedOff) {
  Snapshot({{"x", {"x", 0644}}});
  EditManifest(1, [](nlohmann::json& j) { j["files"][0]["mode"] = 4095; });
  ASSERT_TRUE(Restore("d").ok());
  struct stat st {};
  ASSERT_EQ(::stat(dir_.Join("d/x").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07000, 0u) << std::oct << st.st_mode;
  EXPECT_EQ(st.st_mode & 0777, 0777u);
}

TEST_F(HostileManifestTest, AManifestWithoutFilesIsDamagedAndFallsBack) {
  Snapshot({{"x", {"good", 0644}}});
  Snapshot({{"x", {"newer", 0644}}});
  EditManifest(2, [](nlohmann::json& j) { j["files"] = nlohmann::json::array(); });
  WriteTree(dir_.Join("d"), {{"notes", {"n", 0644}}});
  auto r = Restore("d");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, 1u);
  ASSERT_EQ(r->rejected.size(), 1u);
  EXPECT_NE(r->rejected[0].find("lists no files"), std::string::npos) << r->rejected[0];
  EXPECT_EQ(ReadTree(dir_.Join("d")), (Tree{{"notes", {"n", 0644}}, {"x", {"good", 0644}}}));
}

TEST_F(HostileManifestTest, AManifestMissingARequiredFieldIsDamaged) {
  for (const char* field : {"created", "instance", "generation", "files"}) {
    SCOPED_TRACE(field);
    const uint64_t seq = Snapshot({{"x", {"v", 0644}}});
    const std::string path = dir_.Join("store/" + ManifestKey("job", seq));
    auto text = ReadFileToString(path);
    ASSERT_TRUE(text.ok());
    nlohmann::json j = nlohmann::json::parse(*text);
    j.erase(field);
    auto parsed = ParseManifest(j.dump(), "job", seq);
    ASSERT_FALSE(parsed.ok());
    EXPECT_TRUE(parsed.status().Is(StatusCode::kCorruption));
    EXPECT_NE(parsed.status().message().find(field), std::string::npos)
        << parsed.status().message();
  }
}

}  // namespace
}  // namespace sg::testing
