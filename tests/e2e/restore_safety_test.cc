// Restore never loses what is not its own (docs/design.md): `spotguard
// restore` and `run`'s restore at start keep unrelated files, dotfiles and a
// trainer's logs, and refuse a file system mounted below the target; a local checkpoint the store
// does not hold is resumed from and uploaded, never overwritten by an older snapshot. The real
// binary against the Ceph gateway.
#include <gtest/gtest.h>

#include "agent/repo/snapshot_writer.h"
#include "common/crypto.h"
#include "tests/e2e/agent_e2e_fixture.h"
#include "tests/support/capture_in_place.h"
#include "tests/support/fake_clock.h"
#include "tests/support/tree.h"
#include "tests/support/manifest_bytes.h"

namespace sg::testing {
namespace {

class RestoreSafetyE2E : public AgentE2E {
 protected:
  // Commits `tree` (written under a scratch dir) as the job's next snapshot.
  uint64_t Commit(const Tree& tree, std::optional<int64_t> step = std::nullopt) {
    const std::string src = dir_.Join("commit-" + std::to_string(++commits_));
    WriteTree(src, tree);
    SnapshotRequest req;
    req.job = "job";
    auto capture = CaptureTree(src, step);
    EXPECT_TRUE(capture.ok()) << capture.status().ToString();
    if (!capture.ok()) return 0;
    req.instance = "i-earlier";
    SnapshotWriter writer(*store_, SystemClock(), SnapshotOptions{});
    auto r = writer.Write(*capture, req);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->seq : 0;
  }

  std::unique_ptr<AgentProcess> Cli(const std::string& name, std::vector<std::string> args) {
    std::map<std::string, std::string> env = s3_.AwsEnv();
    env["SPOTGUARD_CONFIG"] = "";
    args.insert(args.end(), {"--job", "job", "--store", "s3://" + s3_.bucket + "/" + prefix_,
                             "--endpoint", s3_.endpoint});
    return std::make_unique<AgentProcess>(args, env, dir_.Join(name + ".log"));
  }

  // Runs SPOTGUARD_BIN `args` inside `unshare --mount` (a private mount
  // namespace of its own, as the issue's reproduction does): first a tmpfs is
  // mounted at `dir`/data holding dataset.txt; afterwards the script prints
  // MOUNTED when it is still mounted there, its file's content, the entries
  // of `dir` and any backup or temporary dir left beside it.
  std::unique_ptr<AgentProcess> InMountNamespace(const std::string& name, const std::string& dir,
                                                 const std::vector<std::string>& args,
                                                 std::map<std::string, std::string> env) {
    const std::string script =
        "d=$1; shift\n"
        "mkdir -p \"$d/data\" && mount -t tmpfs -o size=4m tmpfs \"$d/data\" &&\n"
        "  printf 'the dataset' > \"$d/data/dataset.txt\" || exit 99\n"
        "\"$@\"; rc=$?\n"
        "mountpoint -q \"$d/data\" && echo \"MOUNTED $d/data\"\n"
        "echo \"DATASET [$(cat \"$d/data/dataset.txt\")]\"\n"
        "ls -A \"$d\" | sed 's/^/ENTRY /'\n"
        "ls -d \"$d\".spotguard-backup-* \"$(dirname \"$d\")/.$(basename "
        "\"$d\")\".spotguard-restore-* "
        "2>/dev/null | sed 's/^/LEFT /'\n"
        "exit $rc\n";
    env["SPOTGUARD_CONFIG"] = "";
    return std::make_unique<AgentProcess>(
        args, env, dir_.Join(name + ".log"),
        std::vector<std::string>{"unshare", "--mount", "--propagation", "private", "sh", "-c",
                                 script, "sh", dir});
  }

  // What InMountNamespace printed about `dir` once the command ended.
  void ExpectMountUntouched(const std::string& out, const std::string& dir) {
    EXPECT_NE(out.find("MOUNTED " + dir + "/data"), std::string::npos) << out;
    EXPECT_NE(out.find("DATASET [the dataset]"), std::string::npos) << out;
    EXPECT_NE(out.find("ENTRY data\n"), std::string::npos) << out;
    EXPECT_EQ(out.find("ENTRY model.pt"), std::string::npos) << "the target changed\n" << out;
    EXPECT_EQ(out.find("LEFT "), std::string::npos) << out;
    EXPECT_NE(out.find(dir + "/data (tmpfs)"), std::string::npos) << "names the mount\n" << out;
  }

  int commits_ = 0;
};

// Issue 32 item 1: a file system mounted below the target (a dataset on
// tmpfs, EFS, NFS) is refused with exit 2 and left as it was; it used to be
// copied onto the root disk and emptied.
TEST_F(RestoreSafetyE2E, RestoreRefusesATargetWithAFileSystemMountedBelowIt) {
  Commit({{"model.pt", {"weights", 0644}}});
  const std::string tgt = dir_.Join("tgt");
  auto r = InMountNamespace("restore", tgt,
                            {"restore", "--to", tgt, "--force", "--job", "job", "--store",
                             "s3://" + s3_.bucket + "/" + prefix_, "--endpoint", s3_.endpoint},
                            s3_.AwsEnv());
  ASSERT_EQ(r->Wait(60s), std::optional<int>(2)) << r->Output();
  ExpectMountUntouched(r->Output(), tgt);
  EXPECT_NE(r->Output().find("nothing was changed"), std::string::npos) << r->Output();
}

// The same at `run`'s start: refused before the lease and the trainer.
TEST_F(RestoreSafetyE2E, RunRefusesACheckpointDirWithAFileSystemMountedBelowIt) {
  Commit({{"model.pt", {"weights", 0644}}});
  const std::string ckpt = dir_.Join("ckpt");
  std::map<std::string, std::string> env = s3_.AwsEnv();
  env["SPOTGUARD_LOG_LEVEL"] = "debug";
  auto a = InMountNamespace("run", ckpt,
                            {"run", "-c", WriteConfig("a", {"--steps", "20"}), "--checkpoint-dir",
                             ckpt, "--imds-endpoint", imds_.endpoint()},
                            env);
  ASSERT_EQ(a->Wait(60s), std::optional<int>(2)) << a->Output();
  ExpectMountUntouched(a->Output(), ckpt);
  EXPECT_EQ(a->Output().find("started the trainer"), std::string::npos) << a->Output();
  EXPECT_TRUE(
      static_cast<ObjectStore&>(*store_).Get("job/lease").status().Is(StatusCode::kNotFound))
      << "the lease was never taken";
}

// The reproduction of the defect, through the command line.
TEST_F(RestoreSafetyE2E, RestoreToADirectoryKeepsKeysCodeAndDotfiles) {
  Commit({{"step_200.pt", {"weights", 0644}}}, 200);
  const Tree mine = {
      {".ssh/id_rsa", {"key", 0600}}, {"code/main.py", {"print()", 0644}}, {".env", {"X=1", 0644}}};
  WriteTree(dir_.Join("d"), mine);
  auto r = Cli("restore", {"restore", "--to", dir_.Join("d")});
  ASSERT_EQ(r->Wait(60s), std::optional<int>(0)) << r->Output();
  Tree want = mine;
  want["step_200.pt"] = {"weights", 0644};
  EXPECT_EQ(ReadTree(dir_.Join("d")), want);
}

TEST_F(RestoreSafetyE2E, RestoreRefusesToReplaceAFileItDidNotWriteUnlessForced) {
  Commit({{"last.pt", {"from the store", 0644}}});
  WriteTree(dir_.Join("d"), {{"last.pt", {"my own", 0644}}});
  auto refused = Cli("refused", {"restore", "--to", dir_.Join("d")});
  ASSERT_EQ(refused->Wait(60s), std::optional<int>(2)) << refused->Output();
  EXPECT_NE(refused->Output().find("last.pt"), std::string::npos) << refused->Output();
  EXPECT_NE(refused->Output().find("--force"), std::string::npos) << refused->Output();
  EXPECT_EQ(ReadTree(dir_.Join("d")), (Tree{{"last.pt", {"my own", 0644}}}));

  auto forced = Cli("forced", {"restore", "--to", dir_.Join("d"), "--force"});
  ASSERT_EQ(forced->Wait(60s), std::optional<int>(0)) << forced->Output();
  EXPECT_EQ(ReadTree(dir_.Join("d")), (Tree{{"last.pt", {"from the store", 0644}}}));
  std::smatch m;
  const std::string out = forced->Output();
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(are kept in (\S+))"))) << out;
  EXPECT_EQ(ReadTree(m[1].str()), (Tree{{"last.pt", {"my own", 0644}}}));
}

// `run` on a machine whose checkpoint dir holds the trainer's other files and
// an older checkpoint: the newer snapshot is restored beside them.
TEST_F(RestoreSafetyE2E, RunsRestoreAtStartKeepsTheTrainersOtherFiles) {
  // A real checkpoint of the example trainer at step 40, committed.
  const std::string src = dir_.Join("trained");
  auto trained =
      RunCommand({SPOTGUARD_PYTHON, SPOTGUARD_SOURCE_DIR "/examples/simple_trainer.py", "--out",
                  src, "--steps", "40", "--step-seconds", "0", "--checkpoint-every", "20"});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  auto step40 = ReadFileToString(src + "/step_000040.ckpt");
  auto step20 = ReadFileToString(src + "/step_000020.ckpt");
  ASSERT_TRUE(step40.ok() && step20.ok());
  Commit({{"step_000040.ckpt", {*step40, 0644}}}, 40);
  const Tree theirs = {{"runs/events.out.tfevents", {"events", 0644}},
                       {"tokenizer.json", {"{\"v\": 1}", 0644}},
                       {".hidden/state", {"s", 0600}},
                       {"step_000020.ckpt", {*step20, 0644}}};
  WriteTree(dir_.Join("ckpt"), theirs);

  auto a = StartAgent("a", WriteConfig("a", {"--steps", "60"}), "ckpt", imds_);
  ASSERT_EQ(a->Wait(90s), std::optional<int>(0)) << a->Output();
  EXPECT_NE(a->Output().find("at step 40"), std::string::npos) << a->Output();
  const Tree after = ReadTree(dir_.Join("ckpt"));
  for (const auto& [rel, f] : theirs) {
    auto it = after.find(rel);
    ASSERT_NE(it, after.end()) << rel << " was lost\n" << a->Output();
    EXPECT_EQ(it->second, f) << rel;
  }
  EXPECT_TRUE(after.contains("step_000040.ckpt"));
  EXPECT_TRUE(after.contains("step_000060.ckpt"));
}

// The reproduction of the second defect: local last.pt at "version 8", the
// store's at "version 6"; names without a step used to lose to the store.
TEST_F(RestoreSafetyE2E, ALocalCheckpointTheStoreLacksIsResumedAndUploadedFirst) {
  Commit({{"last.pt", {"version 6", 0644}}});
  WriteTree(dir_.Join("ckpt"), {{"last.pt", {"version 8", 0644}}});
  // Settled already: written before the agent starts, as after a restart (the
  // agent takes a file modified within the settle time as still being written).
  std::filesystem::last_write_time(dir_.Join("ckpt/last.pt"),
                                   std::filesystem::file_time_type::clock::now() - 5s);
  const std::string trainer =
      "import os\n"
      "r = os.environ.get('SPOTGUARD_RESUME_FROM', '')\n"
      "print('resuming from:', open(r).read() if os.path.isfile(r) else 'nothing', flush=True)\n";
  const std::string config = WriteConfig(
      "a", {}, {{"patterns", {"last.pt"}}, {"command", {SPOTGUARD_PYTHON, "-c", trainer}}});
  auto a = StartAgent("a", config, "ckpt", imds_);
  ASSERT_EQ(a->Wait(60s), std::optional<int>(0)) << a->Output();
  EXPECT_NE(a->Output().find("resuming from: version 8"), std::string::npos) << a->Output();
  EXPECT_NE(a->Output().find("is not in the store"), std::string::npos) << a->Output();
  EXPECT_EQ(ReadTree(dir_.Join("ckpt")), (Tree{{"last.pt", {"version 8", 0644}}}));
  // The store's newest snapshot now holds it.
  const Manifest newest = ManifestOf(Committed().front());
  ASSERT_EQ(newest.files.size(), 1u);
  EXPECT_TRUE(HoldsManifestBytes("version 8", newest.files[0]));
}

}  // namespace
}  // namespace sg::testing
