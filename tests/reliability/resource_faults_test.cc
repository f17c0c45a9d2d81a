// Resource faults (issue #10, item 3) with the real binary: a full disk under
// restore (a small tmpfs, out of bytes or out of inodes), a read-only
// checkpoint dir (a read-only tmpfs, a read-only bind mount), and the
// checkpoint dir deleted under a running agent's watcher.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "tests/e2e/e2e_base.h"
#include "tests/reliability/crash_support.h"
#include "tests/support/random_bytes.h"
#include "tests/support/reliability_record.h"
#include "tests/support/temp_dir.h"
#include "tests/support/manifest_bytes.h"

namespace sg::testing {
namespace {

using namespace std::chrono_literals;

// A tmpfs mounted for one test, unmounted (lazily, so even a busy one goes)
// when the test ends, whatever its outcome.
class TmpfsMount {
 public:
  TmpfsMount(const std::string& at, const std::string& options) : at_(at) {
    std::filesystem::create_directories(at);
    if (::mount("tmpfs", at.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      error_ = std::string("mount -t tmpfs -o ") + options + " " + at + ": " + std::strerror(errno);
      return;
    }
    mounted_ = true;
  }
  ~TmpfsMount() {
    for (auto it = binds_.rbegin(); it != binds_.rend(); ++it) ::umount2(it->c_str(), MNT_DETACH);
    if (mounted_) ::umount2(at_.c_str(), MNT_DETACH);
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  bool ok() const { return mounted_; }
  const std::string& error() const { return error_; }
  Status Remount(const std::string& options, unsigned long flags = 0) {
    if (::mount("tmpfs", at_.c_str(), "tmpfs", MS_REMOUNT | flags, options.c_str()) != 0)
      return Status::FromErrno(errno, "remount " + at_ + " " + options);
    return Status::Ok();
  }
  // `dir` bind-mounted onto itself, read-only.
  Status ReadOnlyBind(const std::string& dir) {
    if (::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0)
      return Status::FromErrno(errno, "bind " + dir);
    binds_.push_back(dir);
    if (::mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0)
      return Status::FromErrno(errno, "remount,bind,ro " + dir);
    return Status::Ok();
  }

 private:
  std::string at_, error_;
  bool mounted_ = false;
  std::vector<std::string> binds_;
};

class ResourceFaults : public E2EBase {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "CAPABILITY MISSING: mounting a tmpfs needs root; the resource-fault "
                      "tests did NOT run";
    }
    UseS3("rel-resources");
    cli_.env = sg::testing::AgentEnv(s3_);
    old_["model.bin"] = {RandomBytes(1 << 20, 3), 0644};
    old_["notes.txt"] = {"the checkpoint that was there\n", 0600};
    old_["sub/rng"] = {RandomBytes(777, 4), 0644};
  }
  void TearDown() override {
    if (!store_) return;
    (void)store_->CleanStaleWrites("", std::chrono::seconds(0), {});
    if (auto all = ListAll(*store_, ""); all.ok()) {
      for (const ObjectInfo& o : *all) (void)store_->Delete(o.key);
    }
  }
  std::string WriteConfig(nlohmann::json extra = nlohmann::json::object()) {
    return WriteJobConfig(
        "job-" + RandomHex(3),
        {{"job", "job"}, {"store", store_url_}, {"endpoint", s3_.endpoint}, {"preset", "generic"}},
        extra);
  }
  // Commits a snapshot of `tree` and returns its config.
  std::string Snapshot(const Tree& tree) {
    const std::string src = dir_.Join("src-" + RandomHex(3));
    WriteTree(src, tree);
    std::string config = WriteConfig();
    CommandResult r = cli_.Run({"snapshot", "-c", config, "--dir", src});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return config;
  }

  Cli cli_;
  Tree old_;
};

// Restore failed: the target is exactly the old checkpoint and no temp dir
// of the restore is left beside it. Returns 1 when the old checkpoint was
// damaged (lost), else 0.
int ExpectUntouched(const std::string& parent, const std::string& target, const Tree& old) {
  const bool intact = TreeDigest(ReadTree(target)) == TreeDigest(old);
  EXPECT_TRUE(intact) << target << " was changed";
  EXPECT_TRUE(EntriesStartingWith(parent, ".ckpt.spotguard-restore-").empty())
      << "a temp dir of the failed restore is left in " << parent;
  return intact ? 0 : 1;
}

TEST_F(ResourceFaults, RestoreOntoAFullDiskSaysSoAndLeavesTheTargetUntouched) {
  ReliabilityRecord rec;
  rec.test = "resources_full_disk_restore";
  rec.area = "resources";
  rec.faults =
      "restore onto a tmpfs too small in bytes (refused up front) and in inodes "
      "(ENOSPC while writing)";

  // Out of bytes: 24 MiB into a 40 MiB tmpfs (the restore wants 64 MiB to spare).
  {
    Tree big;
    big["model.bin"] = {RandomBytes(24 << 20, 5), 0644};
    const std::string config = Snapshot(big);
    const std::string mnt = dir_.Join("small");
    TmpfsMount fs(mnt, "size=40m,mode=0755");
    ASSERT_TRUE(fs.ok()) << fs.error();
    const std::string target = mnt + "/ckpt";
    WriteTree(target, old_);
    // --force: the old checkpoint has a model.bin too, which a plain restore
    // would refuse to replace before it ever looked at the disk.
    CommandResult r = cli_.Run({"restore", "-c", config, "--to", target, "--force"});
    ++rec.trials;
    ++rec.faults_injected;
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("not enough free space on the disk holding " + mnt), std::string::npos)
        << r.err;
    rec.lost += ExpectUntouched(mnt, target, old_);
  }
  // Out of inodes: the free-space check passes, creating the files fails.
  {
    Tree many;
    for (int i = 0; i < 40; ++i)
      many["shard-" + std::to_string(i)] = {"x" + std::to_string(i), 0644};
    const std::string config = Snapshot(many);
    const std::string mnt = dir_.Join("few-inodes");
    TmpfsMount fs(mnt, "size=200m,mode=0755");
    ASSERT_TRUE(fs.ok()) << fs.error();
    const std::string target = mnt + "/ckpt";
    WriteTree(target, old_);
    struct statvfs vfs {};
    ASSERT_EQ(::statvfs(mnt.c_str(), &vfs), 0);
    const unsigned long used = vfs.f_files - vfs.f_ffree;
    ASSERT_TRUE(fs.Remount("nr_inodes=" + std::to_string(used + 10)).ok());
    CommandResult r = cli_.Run({"restore", "-c", config, "--to", target});
    ++rec.trials;
    ++rec.faults_injected;
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("the disk holding " + mnt + " is full"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(target + " was left as it was"), std::string::npos) << r.err;
    rec.lost += ExpectUntouched(mnt, target, old_);
  }
  rec.detail =
      "exit 1 both times, the message names the disk; target byte-identical to before, "
      "no temp dir left";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
}

TEST_F(ResourceFaults, AReadOnlyCheckpointDirIsRefusedClearlyByRestoreAndRun) {
  ReliabilityRecord rec;
  rec.test = "resources_read_only_checkpoint_dir";
  rec.area = "resources";
  rec.faults = "checkpoint dir on a read-only tmpfs, and a read-only bind mount of it";
  Tree fresh;
  fresh["model.bin"] = {RandomBytes(2 << 20, 8), 0644};
  const std::string config = Snapshot(fresh);

  // The whole file system read-only.
  const std::string mnt = dir_.Join("ro");
  TmpfsMount fs(mnt, "size=200m,mode=0755");  // room enough: only read-only is wrong
  ASSERT_TRUE(fs.ok()) << fs.error();
  const std::string target = mnt + "/ckpt";
  WriteTree(target, old_);
  ASSERT_TRUE(fs.Remount("", MS_RDONLY).ok());
  {
    CommandResult r = cli_.Run({"restore", "-c", config, "--to", target});
    ++rec.trials;
    ++rec.faults_injected;
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("restore target " + target + " is on a read-only file system"),
              std::string::npos)
        << r.err;
    rec.lost += ExpectUntouched(mnt, target, old_);
  }
  {
    // run: refused before the lease is taken and before a trainer starts.
    const std::string run_config = WriteConfig(
        {{"command", {"/bin/sh", "-c", "echo TRAINER RAN; sleep 30"}}, {"patterns", {"*.bin"}}});
    CommandResult r = cli_.Run({"run", "-c", run_config, "--checkpoint-dir", target}, 60s);
    ++rec.trials;
    ++rec.faults_injected;
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE((r.out + r.err).find("checkpoint_dir " + target + " is on a read-only file system"),
              std::string::npos)
        << r.out << r.err;
    EXPECT_EQ((r.out + r.err).find("TRAINER RAN"), std::string::npos);
    EXPECT_TRUE(store_->Head("job/lease").status().Is(StatusCode::kNotFound))
        << "the lease was taken by an agent that cannot work";
    rec.lost += ExpectUntouched(mnt, target, old_);
  }
  ASSERT_TRUE(fs.Remount("", 0).ok());

  // Only the checkpoint dir read-only (a bind mount); its parent writable.
  ASSERT_TRUE(fs.ReadOnlyBind(target).ok());
  {
    CommandResult r = cli_.Run({"restore", "-c", config, "--to", target});
    ++rec.trials;
    ++rec.faults_injected;
    // A bind mount makes the target a mount point, which restore refuses
    // first (docs/design.md §7: a rename cannot swap a mount point), with
    // exit 2 as a mount below the target.
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("restore target " + target + " is a mount point"), std::string::npos)
        << r.err;
    rec.lost += ExpectUntouched(mnt, target, old_);
  }
  rec.detail =
      "exit 1 with \"... is on a read-only file system\"; no lease taken, no trainer "
      "started, checkpoint dir unchanged";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
}

TEST_F(ResourceFaults, TheCheckpointDirDeletedUnderTheWatcherIsWatchedAgainWhenItReturns) {
  ReliabilityRecord rec;
  rec.test = "resources_checkpoint_dir_deleted";
  rec.area = "resources";
  rec.faults =
      "checkpoint dir deleted (rm -rf) and moved away under a running agent; the "
      "trainer re-creates it";
  ImdsSimulator imds;
  ASSERT_FALSE(imds.endpoint().empty());
  const std::string config =
      WriteConfig({{"patterns", {"step_*.ckpt"}},
                   {"settle_time", "200ms"},
                   {"upload_interval", "500ms"},
                   {"stop_grace", "5s"},
                   {"imds", {{"poll_interval", "500ms"}}},
                   {"command",
                    {SPOTGUARD_PYTHON, SPOTGUARD_SOURCE_DIR "/tests/reliability/crash_trainer.py",
                     "--out", "{checkpoint_dir}", "--mib", "0.25", "--every", "0.2"}},
                   {"resume_args", {"--resume", "{resume}"}}});
  std::map<std::string, std::string> env = cli_.env;
  env["AWS_EC2_METADATA_DISABLED"] = "";
  const std::string ckpt = dir_.Join("ckpt");
  AgentProcess agent(
      {"run", "-c", config, "--checkpoint-dir", ckpt, "--imds-endpoint", imds.endpoint()}, env,
      dir_.Join("agent.log"));
  SnapshotCatalog catalog(*store_, "job");
  auto newest_step = [&]() -> int64_t {
    auto c = catalog.Committed();
    if (!c.ok() || c->empty()) return -1;
    auto m = catalog.ReadManifest(c->front());
    return m.ok() && m->step ? *m->step : -1;
  };
  auto wait_for = [&](const std::function<bool()>& done, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(50ms);
    return done();
  };
  ASSERT_TRUE(wait_for([&] { return newest_step() >= 1; }, 60s)) << agent.Output();

  auto count = [&](const std::string& text) {
    const std::string out = agent.Output();
    size_t n = 0;
    for (size_t at = out.find(text); at != std::string::npos; at = out.find(text, at + 1)) ++n;
    return n;
  };
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "rm -rf" : "mv away");
    const int64_t step_before = newest_step();
    if (round == 0) {
      // rm -rf races the trainer's renames: repeat until the dir is gone once.
      std::error_code ec;
      while (std::filesystem::exists(ckpt)) std::filesystem::remove_all(ckpt, ec);
    } else {
      ASSERT_EQ(::rename(ckpt.c_str(), (ckpt + ".gone").c_str()), 0);
    }
    ++rec.trials;
    ++rec.faults_injected;
    ASSERT_TRUE(
        wait_for([&] { return count("was deleted or moved away") >= size_t(round) + 1; }, 30s))
        << agent.Output();
    ASSERT_TRUE(
        wait_for([&] { return count("is back; watching it again") >= size_t(round) + 1; }, 30s))
        << agent.Output();
    // Checkpoints written into the new dir are committed again.
    ASSERT_TRUE(wait_for([&] { return newest_step() > step_before + 2; }, 60s)) << agent.Output();
    ASSERT_FALSE(agent.Wait(0ms).has_value()) << "the agent died: " << agent.Output();
    std::filesystem::remove_all(ckpt + ".gone");
  }

  ::kill(agent.pid(), SIGTERM);
  const auto code = agent.Wait(60s);
  ASSERT_TRUE(code.has_value()) << agent.Output();
  EXPECT_EQ(*code, 75) << agent.Output();

  // Every snapshot of the run holds a whole checkpoint (none is empty), and
  // the newest restores as the trainer wrote it.
  auto committed = catalog.Committed();
  ASSERT_TRUE(committed.ok());
  for (uint64_t seq : *committed) {
    auto m = catalog.ReadManifest(seq);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->files.size(), 1u) << "snapshot " << SeqName(seq);
    ++rec.committed;
  }
  const std::string into = dir_.Join("restored");
  CommandResult r = cli_.Run({"restore", "-c", config, "--to", into});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto m = catalog.ReadManifest(committed->front());
  ASSERT_TRUE(m.ok() && m->step && m->files.size() == 1);
  auto got = ReadFileToString(into + "/" + m->files[0].path);
  ASSERT_TRUE(got.ok());
  const bool intact =
      got->starts_with("spotguard-crash-trainer step=" + std::to_string(*m->step) + "\n") &&
      HoldsManifestBytes(*got, m->files[0]);
  EXPECT_TRUE(intact) << "the newest snapshot does not restore as the trainer wrote it";
  rec.restored = intact ? 1 : 0;
  rec.lost = intact ? 0 : 1;

  rec.detail =
      "the agent logs the loss, keeps running, watches the re-created dir and commits "
      "from it again; no empty snapshot; exit 75 on SIGTERM";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
}

}  // namespace
}  // namespace sg::testing
