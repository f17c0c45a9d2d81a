// The backups the agent's restores leave beside the checkpoint dir
// (agent/repo/round_backups.h, docs/design.md §7 "Backups of the checkpoint
// dir"): the marked ones beyond the newest few go when every file in them
// is kept elsewhere; one with a foreign file stays and is logged; symlinks
// are never followed; a pruning cut short is finished by the next one; and
// run's restore at start prunes.
#include "agent/repo/round_backups.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>

#include "agent/ledger/events.h"
#include "agent/run/job_start.h"
#include "common/files.h"
#include "common/log.h"
#include "tests/support/file_store_fixture.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

namespace fs = std::filesystem;

// The lines logged while it lives.
class LogLines {
 public:
  LogLines() {
    InitLogging(LogLevel::kInfo, LogFormat::kText);  // the tap is a sink of its loggers
    SetLogTap([this](std::string_view, std::string_view level, std::string_view message) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(std::string(level) + " " + std::string(message));
    });
  }
  ~LogLines() { SetLogTap({}); }
  std::vector<std::string> With(const std::string& part) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const std::string& l : lines_) {
      if (l.find(part) != std::string::npos) out.push_back(l);
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

// `ckpt`'s backup of `stamp` holding `tree`, marked `hours_ago` (the order of the pruning).
std::string MarkedBackup(const std::string& ckpt, const std::string& stamp, const Tree& tree,
                         int hours_ago) {
  const std::string backup = ckpt + ".spotguard-backup-" + stamp;
  fs::create_directories(backup);
  WriteTree(backup, tree);
  EXPECT_TRUE(MarkAgentBackup(backup, "made by a test").ok());
  fs::last_write_time(backup + "/" + kAgentBackupMark,
                      fs::file_time_type::clock::now() - std::chrono::hours(hours_ago));
  return backup;
}

// Prunes `ckpt`'s backups beyond the newest `keep`: `removed` go, `kept`
// (backup, its first foreign path) stay for a foreign file.
void ExpectPruning(const std::string& ckpt, int keep, const std::vector<std::string>& removed,
                   const std::vector<std::pair<std::string, std::string>>& kept) {
  auto pruned = PruneAgentBackups(ckpt, keep);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(pruned->removed, removed);
  std::vector<std::pair<std::string, std::string>> got;
  for (const KeptBackup& k : pruned->kept) got.emplace_back(k.dir, k.foreign);
  EXPECT_EQ(got, kept);
}

TEST(AgentBackups, MarkedBackupsBeyondTheNewestTwoWhoseFilesAreKeptElsewhereGo) {
  TempDir dir;
  const std::string ckpt = dir.Join("ckpt");
  WriteTree(ckpt, {{"step_5/model.pt", {"weights"}}});
  const Tree same = {{"step_5/model.pt", {"weights"}}};
  const std::string b10 = MarkedBackup(ckpt, "20261129T100000Z", same, 10);
  const std::string b11 = MarkedBackup(ckpt, "20261129T110000Z", same, 9);
  const std::string b12 = MarkedBackup(ckpt, "20261129T120000Z", same, 8);
  const std::string b13 = MarkedBackup(ckpt, "20261129T130000Z", same, 7);
  // A backup made by `spotguard restore --force` by hand, older than all.
  WriteTree(ckpt + ".spotguard-backup-20261129T090000Z", same);
  // Another dir's backup, and a file of the same shape.
  MarkedBackup(dir.Join("other"), "20261129T080000Z", same, 20);
  ASSERT_TRUE(WriteFileAtomic(ckpt + ".spotguard-backup-20261129T070000Z", "a file").ok());

  auto pruned = PruneAgentBackups(ckpt + "/", 2);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(pruned->removed, (std::vector<std::string>{b11, b10}));
  EXPECT_TRUE(pruned->kept.empty());
  EXPECT_FALSE(fs::exists(b10));
  EXPECT_FALSE(fs::exists(b11));
  EXPECT_TRUE(fs::exists(b12 + "/step_5/model.pt"));
  EXPECT_TRUE(fs::exists(b13));
  EXPECT_TRUE(fs::exists(ckpt + ".spotguard-backup-20261129T090000Z")) << "unmarked: kept";
  EXPECT_TRUE(fs::exists(dir.Join("other.spotguard-backup-20261129T080000Z")));
  EXPECT_TRUE(fs::exists(ckpt + ".spotguard-backup-20261129T070000Z"));
  EXPECT_EQ(ReadTree(ckpt), same);

  auto again = PruneAgentBackups(ckpt, 2);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->removed.empty());
}

// A file no other place holds with the same bytes (a user's notes, or an
// older version of a file the newer backups hold) keeps its backup, logged.
TEST(AgentBackups, ABackupHoldingAForeignFileStaysAndIsLogged) {
  TempDir dir;
  const std::string ckpt = dir.Join("ckpt");
  WriteTree(ckpt, {{"model.pt", {"v3"}}});
  const std::string notes = MarkedBackup(ckpt, "20261129T100000Z",
                                         {{"model.pt", {"v3"}}, {"notes/todo.txt", {"mine"}}}, 10);
  const std::string older = MarkedBackup(ckpt, "20261129T103000Z", {{"model.pt", {"v1"}}}, 9);
  // Same size, other bytes: not the same file.
  const std::string alike = MarkedBackup(ckpt, "20261129T104000Z", {{"model.pt", {"v2"}}}, 8);
  const std::string covered = MarkedBackup(ckpt, "20261129T105000Z", {{"model.pt", {"v3"}}}, 7);
  // The newest: kept whatever they hold.
  MarkedBackup(ckpt, "20261129T110000Z", {{"model.pt", {"v4"}}}, 2);
  MarkedBackup(ckpt, "20261129T120000Z", {{"model.pt", {"v5"}}}, 1);

  LogLines log;
  KeepFewAgentBackups(ckpt, ckpt + ".spotguard-backup-20261129T120000Z", "made by a test", 2);
  EXPECT_FALSE(fs::exists(covered));
  EXPECT_EQ(ReadTree(notes), (Tree{{"model.pt", {"v3"}}, {"notes/todo.txt", {"mine"}}}));
  EXPECT_TRUE(fs::exists(older + "/model.pt"));
  EXPECT_TRUE(fs::exists(alike + "/model.pt"));
  const auto kept = log.With("kept /");
  ASSERT_EQ(kept.size(), 3u);
  for (const std::string& line : kept) EXPECT_TRUE(line.starts_with("warn ")) << line;
  EXPECT_NE(kept[0].find(alike + " beyond the newest 2 backups: it holds model.pt,"),
            std::string::npos)
      << kept[0];
  EXPECT_NE(kept[2].find(notes + " beyond the newest 2 backups: it holds notes/todo.txt,"),
            std::string::npos)
      << kept[2];
  EXPECT_EQ(log.With("removed " + covered).size(), 1u);
}

// A file the restore replaced with the same bytes (the trainer's own copy
// of the step the snapshot holds) is named in the mark as the snapshot's:
// it is not foreign once the checkpoint dir moved on, unless it changed.
TEST(AgentBackups, AFileWithTheSnapshotsBytesWhenMarkedIsNotForeign) {
  TempDir dir;
  const std::string ckpt = dir.Join("ckpt");
  WriteTree(ckpt, {{"step_25.pt", {"0 25 1234"}}});  // as the restore left it
  const std::string same = ckpt + ".spotguard-backup-20261129T100000Z";
  WriteTree(same, {{"step_25.pt", {"0 25 1234"}}});
  ASSERT_TRUE(MarkAgentBackup(same, "made by a test", ckpt).ok());
  const std::string edited = ckpt + ".spotguard-backup-20261129T090000Z";
  WriteTree(edited, {{"step_25.pt", {"0 25 1234"}}});
  ASSERT_TRUE(MarkAgentBackup(edited, "made by a test", ckpt).ok());
  fs::last_write_time(edited + "/" + kAgentBackupMark,
                      fs::file_time_type::clock::now() - std::chrono::hours(1));
  WriteTree(edited, {{"step_25.pt", {"0 25 9999"}}});  // changed since
  // The next restore removed its own step_25.pt.
  fs::remove(ckpt + "/step_25.pt");

  ExpectPruning(ckpt, 0, {same}, {{edited, "step_25.pt"}});
}

// Neither the judging nor the removal goes through a symlink: a link in a
// backup is compared as a link and removed as one, and a file reached
// through a linked directory elsewhere is not the same path.
TEST(AgentBackups, SymlinksArePrunedAsLinksAndNeverFollowed) {
  TempDir dir;
  const std::string ckpt = dir.Join("ckpt");
  const std::string outside = dir.Join("outside");
  WriteTree(outside, {{"data/big.bin", {"user data"}}, {"weights", {"w"}}});
  WriteTree(ckpt, {{"keep.txt", {"k"}}});
  fs::create_directory_symlink(outside + "/data", ckpt + "/data");
  // The same link as the checkpoint dir's: it goes, and only the link.
  const std::string linked = MarkedBackup(ckpt, "20261129T100000Z", {}, 10);
  fs::create_directory_symlink(outside + "/data", linked + "/data");
  // A file whose path in the checkpoint dir runs through a symlink.
  const std::string through =
      MarkedBackup(ckpt, "20261129T110000Z", {{"data/big.bin", {"user data"}}}, 9);
  // A link where the checkpoint dir has a file of the target's bytes.
  WriteTree(ckpt, {{"weights", {"w"}}});
  const std::string link_file = MarkedBackup(ckpt, "20261129T120000Z", {}, 8);
  fs::create_symlink(outside + "/weights", link_file + "/weights");

  ExpectPruning(ckpt, 0, {linked}, {{link_file, "weights"}, {through, "data/big.bin"}});
  EXPECT_EQ(ReadTree(outside), (Tree{{"data/big.bin", {"user data"}}, {"weights", {"w"}}}));
  EXPECT_TRUE(fs::is_symlink(ckpt + "/data"));
}

// A pruning killed between its rename and the end of the removal leaves a
// `.spotguard-deleting-*` dir; the next pruning removes it, and only it.
TEST(AgentBackups, TheLeftoverOfAPruningCutShortIsRemovedByTheNext) {
  TempDir dir;
  const std::string ckpt = dir.Join("ckpt");
  WriteTree(ckpt, {{"model.pt", {"w"}}});
  const std::string leftover = ckpt + ".spotguard-deleting-20261129T100000Z";
  WriteTree(leftover, {{"step_1/model.pt", {"half"}}});
  const std::string outside = dir.Join("outside");
  WriteTree(outside, {{"x", {"y"}}});
  fs::create_directory_symlink(outside, leftover + "/step_1/link");
  // Another dir's leftover, and a link of the leftover's shape.
  WriteTree(dir.Join("other.spotguard-deleting-20261129T100000Z"), {{"f", {"g"}}});
  fs::create_directory_symlink(outside, ckpt + ".spotguard-deleting-20261129T110000Z");
  const std::string newest = MarkedBackup(ckpt, "20261129T120000Z", {{"model.pt", {"w"}}}, 1);

  auto pruned = PruneAgentBackups(ckpt, 2);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(pruned->leftovers, std::vector<std::string>{leftover});
  EXPECT_FALSE(fs::exists(leftover));
  EXPECT_TRUE(fs::exists(newest + "/model.pt"));
  EXPECT_TRUE(fs::exists(dir.Join("other.spotguard-deleting-20261129T100000Z/f")));
  EXPECT_TRUE(fs::is_symlink(ckpt + ".spotguard-deleting-20261129T110000Z"));
  EXPECT_EQ(ReadTree(outside), (Tree{{"x", {"y"}}}));
}

class AgentBackupsAtStart : public FileStoreTest {};

// run's restore at start over an older model.pt keeps it in a backup, marks
// that, and prunes the older backups of earlier starts.
TEST_F(AgentBackupsAtStart, RunsRestoreAtStartMarksItsBackupAndPrunes) {
  ASSERT_TRUE(CommitTree({{"model.pt", {"new"}}}).ok());
  Config config;
  config.job = "job";
  config.checkpoint_dir = dir_.Join("ckpt");
  config.preset = Preset::kGeneric;
  config.patterns = {"*.bin"};  // no local checkpoint: the snapshot is restored
  config.settle_time = Duration(100);
  config.backups_keep = 2;
  WriteTree(config.checkpoint_dir, {{"model.pt", {"old"}}});
  const std::string& ckpt = config.checkpoint_dir;
  const Tree earlier = {{"model.pt", {"new"}}};  // what the restore puts back
  const std::string b1 = MarkedBackup(ckpt, "20261129T100000Z", earlier, 30);
  const std::string b2 = MarkedBackup(ckpt, "20261129T110000Z", earlier, 20);
  const std::string b3 = MarkedBackup(ckpt, "20261129T120000Z", earlier, 10);
  EventLog events(*store_, clock_, "job", "i-test");

  auto start = RestoreAtStart(*store_, clock_, config, events);
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  EXPECT_EQ(ReadTree(ckpt), earlier);  // the restore marker aside
  EXPECT_FALSE(fs::exists(b1));
  EXPECT_FALSE(fs::exists(b2));
  EXPECT_TRUE(fs::exists(b3));
  int backups = 0;
  for (const auto& e : fs::directory_iterator(dir_.path())) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("ckpt.spotguard-backup-") || e.path().string() == b3) continue;
    ++backups;
    EXPECT_TRUE(fs::exists(e.path() / kAgentBackupMark)) << name;
    auto model = ReadFileToString((e.path() / "model.pt").string());
    EXPECT_TRUE(model.ok() && *model == "old") << name;
  }
  EXPECT_EQ(backups, 1);
}

}  // namespace
}  // namespace sg::testing
