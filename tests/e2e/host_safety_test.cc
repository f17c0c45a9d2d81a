// One agent per checkpoint directory, and no orphans (docs/agent.md): the
// spotguard binary with real trainers, real signals and a file:// store; no
// metadata service (the instance is the host name, the same for every agent).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "agent/trainer/host_lock.h"
#include "agent/repo/lease.h"
#include "agent/trainer/trainer_record.h"
#include "common/file_store.h"
#include "common/files.h"
#include "common/proc_stat.h"
#include "common/process.h"
#include "tests/e2e/file_store_agent_fixture.h"
#include "tests/support/agent_process.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

using HostSafety = FileStoreAgentTest;

TEST_F(HostSafety, ASecondAgentForTheSameCheckpointDirExits4AndLeavesTheFirstAlone) {
  const std::string ckpt = dir_.Join("ckpt");
  dir_.WriteFile("ckpt/model.bin", "weights of the first agent's trainer");
  const std::string config = WriteConfig("a", {"/bin/sleep", "600"});
  auto a = StartAgent("a", config, ckpt);
  ASSERT_TRUE(a->WaitForOutput("started the trainer (pid ", 30s)) << a->Output();
  const pid_t trainer = TrainerPid(a->Output());
  ASSERT_GT(trainer, 0);
  groups_to_kill_.push_back(trainer);
  // Wait for a committed snapshot: an agent that wrongly took over would
  // restore it, swapping the directory under the trainer.
  ASSERT_TRUE(WaitFor([&] { return a->Output().find("committed") != std::string::npos; }, 30s))
      << a->Output();
  struct stat before {};
  ASSERT_EQ(::stat(ckpt.c_str(), &before), 0);

  auto b = StartAgent("b", config, ckpt);
  const auto b_exit = b->Wait(60s);
  ASSERT_TRUE(b_exit.has_value()) << "the second agent must not keep running\n" << b->Output();
  EXPECT_EQ(*b_exit, 4) << b->Output();
  EXPECT_NE(b->Output().find("another spotguard agent (pid " + std::to_string(a->pid()) + ")"),
            std::string::npos)
      << b->Output();
  EXPECT_NE(b->Output().find("checkpoint_dir " + ckpt), std::string::npos) << b->Output();
  EXPECT_EQ(b->Output().find("started the trainer"), std::string::npos) << b->Output();

  EXPECT_FALSE(a->Wait(0ms).has_value()) << "the first agent still runs\n" << a->Output();
  EXPECT_TRUE(Alive(trainer)) << "the first agent's trainer still runs";
  struct stat after {};
  ASSERT_EQ(::stat(ckpt.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "the checkpoint dir was not swapped";
  EXPECT_EQ(Contents(ckpt + "/model.bin"), "weights of the first agent's trainer");

  ASSERT_EQ(::kill(a->pid(), SIGTERM), 0);
  const auto a_exit = a->Wait(60s);
  ASSERT_TRUE(a_exit.has_value()) << a->Output();
  EXPECT_EQ(*a_exit, 75) << a->Output();
}

TEST_F(HostSafety, AnotherAgentOfTheSameInstanceWaitsForTheLeaseInsteadOfTakingItOver) {
  // Two checkpoint dirs, so the host lock does not stop the second agent:
  // the lease must (same job, same instance, but the first agent is alive).
  const std::string config = WriteConfig("a", {"/bin/sleep", "600"});
  auto a = StartAgent("a", config, dir_.Join("ckpt-a"));
  ASSERT_TRUE(a->WaitForOutput("started the trainer (pid ", 30s)) << a->Output();
  groups_to_kill_.push_back(TrainerPid(a->Output()));
  auto b = StartAgent("b", config, dir_.Join("ckpt-b"));
  ASSERT_TRUE(b->WaitForOutput("waiting for it to be released", 30s)) << b->Output();
  EXPECT_NE(b->Output().find("(agent pid " + std::to_string(a->pid()) + ")"), std::string::npos)
      << b->Output();
  EXPECT_EQ(b->Output().find("started the trainer"), std::string::npos) << b->Output();
  auto lease = Lease();
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(lease->agent.has_value());
  EXPECT_EQ(lease->agent->pid, a->pid()) << "the first agent still holds the lease";

  ASSERT_EQ(::kill(b->pid(), SIGTERM), 0);
  const auto b_exit = b->Wait(60s);
  ASSERT_TRUE(b_exit.has_value()) << b->Output();
  EXPECT_EQ(*b_exit, 75) << "stopped while waiting for the lease: not done\n" << b->Output();
  ASSERT_EQ(::kill(a->pid(), SIGTERM), 0);
  const auto a_exit = a->Wait(60s);
  ASSERT_TRUE(a_exit.has_value()) << a->Output();
  EXPECT_EQ(*a_exit, 75) << a->Output();
}

TEST_F(HostSafety, KillingTheAgentKillsItsTrainerAndTheTrainersProcessGroup) {
  const std::string ckpt = dir_.Join("ckpt");
  const std::string gc_file = dir_.Join("grandchild.pid");
  const std::string config =
      WriteConfig("a", {"/bin/sh", "-c", "sleep 600 & echo $! > " + gc_file + "; wait"});
  auto a = StartAgent("a", config, ckpt);
  ASSERT_TRUE(a->WaitForOutput("started the trainer (pid ", 30s)) << a->Output();
  const pid_t trainer = TrainerPid(a->Output());
  ASSERT_GT(trainer, 0);
  groups_to_kill_.push_back(trainer);
  ASSERT_TRUE(WaitFor([&] { return ReadPidFile(gc_file) > 0; }, 30s));
  const pid_t grandchild = ReadPidFile(gc_file);
  ASSERT_EQ(::getpgid(grandchild), trainer) << "the grandchild is in the trainer's group";
  // The agent recorded its trainer beside the checkpoint dir.
  auto record = ReadTrainerRecord(TrainerRecordPath(ckpt));
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(record->pid, trainer);
  EXPECT_EQ(record->pgid, trainer);

  ASSERT_EQ(::kill(a->pid(), SIGKILL), 0);
  ASSERT_TRUE(a->Wait(30s).has_value());
  EXPECT_TRUE(WaitFor([&] { return !Alive(trainer); }, 10s)) << "the trainer outlived its agent";
  EXPECT_TRUE(WaitFor([&] { return !Alive(grandchild); }, 10s))
      << "the trainer's child outlived the agent";
}

TEST_F(HostSafety, ANewAgentStopsWhatIsLeftOfAnOrphanedTrainerBeforeStartingItsOwn) {
  const std::string ckpt = dir_.Join("ckpt");
  ASSERT_TRUE(MakeDirs(ckpt).ok());
  // An orphan as an agent killed outside systemd by an older spotguard left
  // it: the trainer (group leader) has exited, its child keeps the group and
  // keeps writing.
  const std::string gc_file = dir_.Join("orphan.pid");
  const std::string go = dir_.Join("go");
  SpawnOptions o;
  o.argv = {
      "/bin/sh", "-c",
      "sleep 600 & echo $! > " + gc_file + "; while [ ! -e " + go + " ]; do sleep 0.05; done"};
  o.env = {{"PATH", "/usr/bin:/bin"}};
  auto leader = ChildProcess::Spawn(o);
  ASSERT_TRUE(leader.ok()) << leader.status().ToString();
  const pid_t group = leader->pid();
  groups_to_kill_.push_back(group);
  auto record = RecordOf(group, group);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  ASSERT_TRUE(WriteTrainerRecord(TrainerRecordPath(ckpt), *record).ok());
  ASSERT_TRUE(WaitFor([&] { return ReadPidFile(gc_file) > 0; }, 30s));
  const pid_t orphan = ReadPidFile(gc_file);
  dir_.WriteFile("go", "");
  auto ended = leader->Wait(30s);
  ASSERT_TRUE(ended.ok() && ended->has_value()) << "the leader exits";
  ASSERT_TRUE(Alive(orphan));
  ASSERT_EQ(::getpgid(orphan), group);

  auto a = StartAgent("a", WriteConfig("a", {"/bin/sleep", "600"}), ckpt);
  ASSERT_TRUE(a->WaitForOutput("started the trainer (pid ", 30s)) << a->Output();
  groups_to_kill_.push_back(TrainerPid(a->Output()));
  const std::string out = a->Output();
  EXPECT_FALSE(Alive(orphan)) << "the orphan was stopped before the new trainer started\n" << out;
  const size_t left = out.find("left behind by an earlier agent");
  ASSERT_NE(left, std::string::npos) << out;
  EXPECT_NE(out.find("process group " + std::to_string(group)), std::string::npos) << out;
  EXPECT_LT(left, out.find("started the trainer")) << out;

  ASSERT_EQ(::kill(a->pid(), SIGTERM), 0);
  const auto a_exit = a->Wait(60s);
  ASSERT_TRUE(a_exit.has_value()) << a->Output();
  EXPECT_EQ(*a_exit, 75) << a->Output();
  EXPECT_FALSE(std::filesystem::exists(TrainerRecordPath(ckpt)))
      << "the record goes once the trainer was reaped";
}

// A tmpfs mounted for one test, lazily unmounted at its end.
class Tmpfs {
 public:
  explicit Tmpfs(const std::string& at) : at_(at) {
    std::filesystem::create_directories(at);
    if (::mount("tmpfs", at.c_str(), "tmpfs", 0, "size=4m") != 0) {
      error_ = std::string("mount -t tmpfs ") + at + ": " + std::strerror(errno) +
               " (this test needs root)";
    }
  }
  ~Tmpfs() {
    if (error_.empty()) ::umount2(at_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }

 private:
  std::string at_;
  std::string error_;
};

TEST_F(HostSafety, ACheckpointDirThatCannotWorkIsRefusedBeforeTheLease) {
  const std::string config = WriteConfig("a", {"/bin/sleep", "600"});
  struct Case {
    std::string name, ckpt, expected;
  };
  ASSERT_TRUE(MakeDirs(dir_.Join("real")).ok());
  ASSERT_EQ(::symlink(dir_.Join("real").c_str(), dir_.Join("link").c_str()), 0);
  dir_.WriteFile("file", "not a directory");
  Tmpfs mount(dir_.Join("mnt"));
  ASSERT_EQ(mount.error(), "");
  const std::vector<Case> cases = {
      {"symlink", dir_.Join("link"),
       "checkpoint_dir " + dir_.Join("link") + " is a symlink to " +
           std::filesystem::canonical(dir_.Join("real")).string() + "; set checkpoint_dir to "},
      {"file", dir_.Join("file"), "checkpoint_dir " + dir_.Join("file") + " is a regular file"},
      {"mount", dir_.Join("mnt"),
       "checkpoint_dir " + dir_.Join("mnt") +
           " is a mount point; set checkpoint_dir to a "
           "directory below it"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto a = StartAgent(c.name, config, c.ckpt);
    const auto exit_code = a->Wait(60s);
    ASSERT_TRUE(exit_code.has_value()) << a->Output();
    EXPECT_EQ(*exit_code, 2) << a->Output();
    EXPECT_NE(a->Output().find(c.expected), std::string::npos) << a->Output();
    EXPECT_EQ(a->Output().find("started the trainer"), std::string::npos) << a->Output();
    EXPECT_TRUE(Lease().status().Is(StatusCode::kNotFound)) << "the lease was never taken";
  }
  EXPECT_EQ(Contents(dir_.Join("file")), "not a directory");
}

TEST_F(HostSafety, AFailureAfterTheLeaseIsTakenReleasesIt) {
  // A trainer that cannot start, and (on a second try) a damaged snapshot.
  auto a = StartAgent("a", WriteConfig("a", {dir_.Join("no-such-trainer")}), dir_.Join("ckpt"));
  auto exit_code = a->Wait(60s);
  ASSERT_TRUE(exit_code.has_value()) << a->Output();
  EXPECT_EQ(*exit_code, 1) << a->Output();
  EXPECT_NE(a->Output().find("no-such-trainer"), std::string::npos) << a->Output();
  auto lease = Lease();
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_TRUE(lease->released) << "the failed agent released the lease";
}

}  // namespace
}  // namespace sg::testing
