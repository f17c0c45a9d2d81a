// snapshot, ls, restore, verify and gc through the spotguard binary, on a
// file:// store, checking output and exit codes as scripts see them.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "agent/repo/group_store.h"
#include "common/file_store.h"
#include "common/files.h"
#include "tests/support/big_file.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

class SnapshotCli : public ::testing::Test {
 protected:
  CommandResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), SPOTGUARD_BIN);
    return RunCommand(args, {{"SPOTGUARD_JOB", "e2e"},
                             {"SPOTGUARD_STORE", "file://" + dir_.Join("store")},
                             {"SPOTGUARD_CONFIG", ""}});
  }
  TempDir dir_;
};

TEST_F(SnapshotCli, SnapshotListRestoreVerifyAndGc) {
  const Tree tree = {{"model.pt", {std::string(300000, 'm'), 0644}},
                     {"opt/state.pt", {std::string(1000, 'o'), 0600}}};
  WriteTree(dir_.Join("ckpt"), tree);
  auto snap = Run({"snapshot", "--dir", dir_.Join("ckpt")});
  ASSERT_EQ(snap.exit_code, 0) << snap.err;
  EXPECT_EQ(snap.out, "0000000001\n");
  // The same checkpoint again: every frame is a reference (frame reuse,
  // docs/design.md §4), and the commit line says so.
  auto again = Run({"snapshot", "--dir", dir_.Join("ckpt")});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("(0 B new, "), std::string::npos) << again.err;

  auto ls = Run({"ls", "--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  auto rows = nlohmann::json::parse(ls.out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["seq"], 2);
  EXPECT_EQ(rows[0]["files"], 2);
  EXPECT_EQ(rows[0]["size"], 301000);
  EXPECT_LT(rows[0]["stored_size"].get<int>(), 301000);
  EXPECT_EQ(rows[0]["new_stored_size"], 0);
  EXPECT_EQ(rows[0]["reused_stored_size"], rows[0]["stored_size"]);
  EXPECT_EQ(rows[1]["new_stored_size"], rows[1]["stored_size"]);
  EXPECT_EQ(rows[1]["reused_stored_size"], 0);
  auto text = Run({"ls"});
  EXPECT_NE(text.out.find("0000000002"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("NEW      REUSED"), std::string::npos) << text.out;
  auto verify_refs = Run({"verify", "--snapshot", "2"});
  EXPECT_EQ(verify_refs.exit_code, 0) << verify_refs.err;

  auto restore = Run({"restore", "--to", dir_.Join("back")});
  ASSERT_EQ(restore.exit_code, 0) << restore.err;
  EXPECT_EQ(restore.out, dir_.Join("back") + "\n");
  EXPECT_EQ(ReadTree(dir_.Join("back")), tree);

  auto verify = Run({"verify", "--snapshot", "1"});
  EXPECT_EQ(verify.exit_code, 0) << verify.err;
  EXPECT_NE(verify.out.find("every checksum matches"), std::string::npos);

  auto gc = Run({"gc", "--job", "e2e"});
  EXPECT_EQ(gc.exit_code, 0) << gc.err;
}

TEST_F(SnapshotCli, RestoreOfAnEmptyStoreExitsThree) {
  std::filesystem::create_directories(dir_.Join("store"));
  auto r = Run({"restore", "--to", dir_.Join("x")});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("no snapshot"), std::string::npos) << r.err;
}

// A mistyped file:// store: commands that only read never create it, and
// say which path does not exist (exit 2, a config error: docs/design.md §2).
TEST_F(SnapshotCli, ReadOnlyCommandsNeverCreateAMissingStoreAndNameIt) {
  const std::string root = dir_.Join("store");
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"ls"},
                                             {"ls", "--json"},
                                             {"status"},
                                             {"verify"},
                                             {"logs"},
                                             {"restore", "--to", dir_.Join("x")}}) {
    auto r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("the store file://" + root + " does not exist"), std::string::npos)
        << args[0] << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(root)) << args[0] << " created the store";
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("x")));
  // A command that writes still creates it.
  WriteTree(dir_.Join("ckpt"), {{"model.pt", {"m", 0644}}});
  EXPECT_EQ(Run({"snapshot", "--dir", dir_.Join("ckpt")}).exit_code, 0);
  EXPECT_EQ(Run({"ls"}).exit_code, 0);
}

TEST_F(SnapshotCli, ADamagedSnapshotIsNamedAndTheOlderOneRestored) {
  WriteTree(dir_.Join("v1"), {{"w.pt", {std::string(5000, '1'), 0644}}});
  WriteTree(dir_.Join("v2"), {{"w.pt", {std::string(5000, '2'), 0644}}});
  ASSERT_EQ(Run({"snapshot", "--dir", dir_.Join("v1")}).exit_code, 0);
  ASSERT_EQ(Run({"snapshot", "--dir", dir_.Join("v2")}).exit_code, 0);
  const std::string victim = dir_.Join("store/e2e/snapshots/0000000002/files/w.pt.zst");
  std::string bytes = *ReadFileToString(victim);
  bytes[bytes.size() / 2] ^= 0x7;
  ASSERT_TRUE(WriteFileAtomic(victim, bytes).ok());

  auto verify = Run({"verify"});
  EXPECT_EQ(verify.exit_code, 1);
  EXPECT_NE(verify.err.find("w.pt"), std::string::npos) << verify.err;

  auto r = Run({"restore", "--to", dir_.Join("back")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("0000000002 IS DAMAGED"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("w.pt"), std::string::npos) << r.err;
  EXPECT_EQ(ReadTree(dir_.Join("back")).at("w.pt").content, std::string(5000, '1'));
}

TEST_F(SnapshotCli, UsageMistakesExitTwo) {
  EXPECT_EQ(Run({"snapshot"}).exit_code, 2);
  EXPECT_EQ(Run({"snapshot", dir_.Join("no-such-file")}).exit_code, 2);
  EXPECT_EQ(Run({"restore", "--snapshot", "latest", "--to", dir_.Join("x")}).exit_code, 2);
  EXPECT_EQ(Run({"restore"}).exit_code, 2) << "no --to and no checkpoint_dir";
}

TEST_F(SnapshotCli, FilesInsideTheCheckpointDirKeepTheirRelativePaths) {
  WriteTree(dir_.Join("ckpt"), {{"run1/step_10.pt", {"ten", 0644}}});
  auto snap =
      Run({"snapshot", "--checkpoint-dir", dir_.Join("ckpt"), dir_.Join("ckpt/run1/step_10.pt")});
  ASSERT_EQ(snap.exit_code, 0) << snap.err;
  auto r = Run({"restore", "--checkpoint-dir", dir_.Join("restored")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, dir_.Join("restored/run1/step_10.pt") + "\n");
}

TEST_F(SnapshotCli, AOneGiBCheckpointRoundTripsThroughTheFileStore) {
  const FileDigest want = WriteWeightsFile(dir_.Join("big/model.pt"), 1024);
  auto snap = Run({"snapshot", "--dir", dir_.Join("big")});
  ASSERT_EQ(snap.exit_code, 0) << snap.err;
  std::filesystem::remove_all(dir_.Join("big"));
  auto restore = Run({"restore", "--to", dir_.Join("back")});
  ASSERT_EQ(restore.exit_code, 0) << restore.err;
  EXPECT_EQ(DigestOf(dir_.Join("back/model.pt")), want);
}

TEST_F(SnapshotCli, AProgressLineIsShownOnATerminalOnly) {
  WriteTree(dir_.Join("ckpt"), {{"big.bin", {std::string(20 << 20, 'b'), 0644}}});
  auto plain = Run({"snapshot", "--dir", dir_.Join("ckpt")});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err.find("ETA"), std::string::npos) << "no progress line into a pipe";

  // `script` gives the command a pseudo-terminal.
  const std::string cmd = std::string(SPOTGUARD_BIN) + " restore --to " + dir_.Join("back");
  auto tty = RunCommand({"script", "-qec", cmd, "/dev/null"},
                        {{"SPOTGUARD_JOB", "e2e"},
                         {"SPOTGUARD_STORE", "file://" + dir_.Join("store")},
                         {"SPOTGUARD_CONFIG", ""}});
  ASSERT_EQ(tty.exit_code, 0) << tty.out << tty.err;
  EXPECT_NE(tty.out.find("restore 0000000001"), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("20.0 MiB / 20.0 MiB"), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("ETA"), std::string::npos) << tty.out;
}

// A job trained by 2 nodes holds group snapshots only: ls, status and
// restore without `nodes` say so and how to see them, instead of "none".
TEST_F(SnapshotCli, CommandsWithoutNodesOnAGroupJobSayHowToSeeItsGroupSnapshots) {
  auto store = FileStore::Open(dir_.Join("store"));
  ASSERT_TRUE(store.ok());
  for (uint64_t seq : {1, 2}) {
    GroupCommit g{.seq = seq,
                  .round = seq,
                  .nodes = 2,
                  .step = 20 * static_cast<int64_t>(seq),
                  .generation = 1,
                  .created = "2026-11-22T08:22:00Z",
                  .parts = {}};
    for (int rank = 0; rank < 2; ++rank) {
      g.parts.push_back(PartRecord{
          .rank = rank, .step = g.step, .seq = seq, .instance = "i-a", .bytes = 1, .stored = 1});
    }
    ASSERT_TRUE(GroupStore(**store, "e2e").CommitGroup(g).ok());
  }
  const std::string hint = "job e2e has 2 group snapshots (nodes: 2); add --nodes 2";
  auto ls = Run({"ls"});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.err.find(hint + " to see them"), std::string::npos) << ls.err;
  auto status = Run({"status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("hint: " + hint + " to see them"), std::string::npos) << status.out;
  auto json = Run({"status", "--json"});
  EXPECT_EQ(nlohmann::json::parse(json.out)["hint"], hint + " to see them") << json.out;
  // Not 3 ("nothing to restore": a boot script would start afresh), but 2.
  auto restore = Run({"restore", "--to", dir_.Join("x")});
  EXPECT_EQ(restore.exit_code, 2) << restore.err;
  EXPECT_NE(restore.err.find(hint + " and --rank R"), std::string::npos) << restore.err;
  // With --nodes, ls lists them.
  auto group_ls = Run({"ls", "--nodes", "2"});
  EXPECT_EQ(group_ls.exit_code, 0) << group_ls.err;
  EXPECT_NE(group_ls.out.find("0000000002"), std::string::npos) << group_ls.out;
}

}  // namespace
}  // namespace sg::testing
