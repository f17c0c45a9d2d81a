// A group node's agent does what one node's agent does (docs/design.md §14,
// "Like one node"; docs/multi-node.md), where only real processes show it:
// it makes a checkpoint dir that does not exist yet, reaps orphans as PID 1,
// sends checkpoint_signal where agent/trainer/checkpoint_signal.h says, and
// forwards SIGUSR1, SIGUSR2 and SIGHUP to its trainer. Two real
// agents each, a file:// store, the IMDS simulator. The verdicts wait for
// states (a file, a group snapshot, an exit), never for a time. The
// lifecycle action, checkpoint_interval and on_rebalance of a group are
// checked on the fake multi-node world (tests/unit/group_world_test.cc).
#include <signal.h>
#include <sys/stat.h>

#include "agent/ledger/events.h"
#include "tests/e2e/group_node_fixture.h"

namespace sg::testing {
namespace {

// A trainer that saves only when asked: SIGUSR1 sets a flag (it reads no
// notice file), and once asked it saves step_<N>.pt at every tenth step. The
// flag is shared through `shared`/asked, as a real job's ranks all-reduce
// theirs, so every node saves the same steps; in mode `own` each node has a
// flag of its own (beside its checkpoint dir), as ranks that pass no request
// on: only a node whose own agent asked it saves. `plain`: it starts a helper
// child first (which SIGUSR1 kills: its default action). `launcher`: it is a
// stand-in for torchrun that an unhandled SIGUSR1 kills, running one worker.
constexpr char kAskedTrainer[] = R"PY(#!/usr/bin/python3
import os, signal, subprocess, sys, time
mode, shared = sys.argv[1], sys.argv[2]
if mode == "launcher":
    worker = subprocess.Popen([sys.executable, __file__, "worker", shared])
    sys.exit(worker.wait())
ckpt = os.environ["SPOTGUARD_CHECKPOINT_DIR"]
flag = os.path.join(ckpt, "..", "asked") if mode == "own" else os.path.join(shared, "asked")
def on_usr1(*_):
    open(flag, "a").close()
signal.signal(signal.SIGUSR1, on_usr1)
if mode == "plain":
    helper = subprocess.Popen(["sleep", "600"])
print("ready", flush=True)
step = 0
resume = os.environ.get("SPOTGUARD_RESUME_FROM", "")
if resume:
    step = int(open(resume).read().split()[0])
while True:
    step += 1
    if step % 10 == 0 and os.path.exists(flag):
        tmp = os.path.join(ckpt, ".tmp_%d" % step)
        with open(tmp, "w") as f:
            f.write("%d\n" % step)
        os.rename(tmp, os.path.join(ckpt, "step_%d.pt" % step))
        print("saved step %d" % step, flush=True)
    time.sleep(0.1)
)PY";

// A trainer that leaves five orphans behind and writes reaped.json beside
// its checkpoint dir once they are gone: only PID 1 can make them go, by
// reaping them (docs/design.md §11). Then it trains on.
constexpr char kOrphaningTrainer[] = R"PY(
import json, os, subprocess, time
ckpt = os.environ["SPOTGUARD_CHECKPOINT_DIR"]
go = os.path.join(ckpt, "..", "go")
orphans = [int(p) for p in subprocess.run(
    ["sh", "-c", "for i in 1 2 3 4 5; do (while [ ! -e %s ]; do sleep 0.01; done) >/dev/null 2>&1 & "
     "echo $!; done; exit 0" % go], capture_output=True, text=True).stdout.split()]
open(go, "w").close()
while any(os.path.exists("/proc/%d" % p) for p in orphans):
    time.sleep(0.02)
with open(os.path.join(ckpt, "..", "reaped.json"), "w") as f:
    json.dump({"pid": os.getpid(), "orphans": len(orphans)}, f)
while True:
    time.sleep(0.1)
)PY";

class GroupDutiesE2E : public GroupNodeE2E {
 protected:
  // kAskedTrainer in `mode`; as `launcher` it is named torchrun.
  nlohmann::json AskedTrainer(const std::string& mode) {
    const std::string script =
        dir_.WriteFile(mode == "launcher" ? "bin/torchrun" : "asked_trainer.py", kAskedTrainer);
    ::chmod(script.c_str(), 0755);
    std::filesystem::create_directories(dir_.Join("shared"));
    if (mode == "launcher") return {script, mode, dir_.Join("shared")};
    return {SPOTGUARD_PYTHON, script, mode, dir_.Join("shared")};
  }
  // Two nodes of kAskedTrainer in `mode`, a rebalance recommendation on node
  // 2 once both trainers are ready (asked only once their handlers are in
  // place: a launcher alone in its group would get the signal itself), and
  // the group snapshot that follows.
  void RebalanceOnNode2AndAwaitTheGroupSnapshot(const std::string& mode) {
    const std::string config = JobConfig(2, AskedTrainer(mode));
    StartNode(1, config);
    StartNode(2, config);
    ASSERT_TRUE(nodes_[2].agent->WaitForOutput("] ready", 120s)) << Logs();
    ASSERT_TRUE(nodes_[1].agent->WaitForOutput("] ready", 120s)) << Logs();
    nodes_[2].imds->Control("POST", "/_sim/rebalance", "{}");
    ASSERT_TRUE(WaitFor([&] { return !Groups().empty(); }, 120s)) << Logs();
  }
  // A notice on node 2 once a group snapshot exists; its exit code.
  std::optional<int> NoticeOnNode2() {
    Notice(2);
    return nodes_[2].agent->Wait(150s);
  }
};

TEST_F(GroupDutiesE2E, ACheckpointDirThatDoesNotExistYetIsCreated) {
  const std::string config = JobConfig(2, GroupTrainer());
  NodeOptions fresh_disk;
  fresh_disk.create_ckpt = false;
  StartNode(1, config, fresh_disk);
  StartNode(2, config, fresh_disk);
  ASSERT_TRUE(WaitFor([&] { return !Groups().empty(); }, 120s)) << Logs();
  EXPECT_TRUE(std::filesystem::is_directory(nodes_[1].ckpt));
  EXPECT_TRUE(std::filesystem::is_directory(nodes_[2].ckpt));
}

TEST_F(GroupDutiesE2E, AsPid1ItReapsTheTrainersOrphans) {
  const std::string script = dir_.WriteFile("orphaning_trainer.py", kOrphaningTrainer);
  const std::string config = JobConfig(2, {SPOTGUARD_PYTHON, script});
  NodeOptions pid1;
  pid1.pid1 = true;
  StartNode(1, config, pid1);
  StartNode(2, config, pid1);
  for (int n : {1, 2}) {
    const std::string report = DirName(nodes_[n].ckpt) + "/reaped.json";
    // Unreaped, the orphans stay zombies and the trainer waits forever.
    ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(report); }, 120s)) << Logs();
    EXPECT_NE(nodes_[n].agent->Output().find("running as PID 1"), std::string::npos) << Logs();
  }
}

// A plain trainer gets checkpoint_signal itself, as with one node: before,
// only its helper got it (and died of it), so the trainer never saved and the
// noticed node exited 74.
TEST_F(GroupDutiesE2E, APlainTrainerWithAHelperGetsTheCheckpointSignalOnANotice) {
  const std::string config = JobConfig(2, AskedTrainer("plain"));
  StartNode(1, config);
  StartNode(2, config);
  // Asked only once its handler is in place (a launcher alone in its group
  // would get the signal itself).
  ASSERT_TRUE(nodes_[2].agent->WaitForOutput("] ready", 120s)) << Logs();
  ASSERT_TRUE(nodes_[1].agent->WaitForOutput("] ready", 120s)) << Logs();
  EXPECT_EQ(NoticeOnNode2(), 75) << Logs();
  ASSERT_FALSE(Groups().empty()) << Logs();
}

// Under a launcher (torchrun), checkpoint_signal goes to its workers only:
// the launcher would die of it.
TEST_F(GroupDutiesE2E, UnderALauncherTheCheckpointSignalGoesToTheWorkersOnly) {
  const std::string config = JobConfig(2, AskedTrainer("launcher"));
  StartNode(1, config);
  StartNode(2, config);
  // Asked only once its handler is in place (a launcher alone in its group
  // would get the signal itself).
  ASSERT_TRUE(nodes_[2].agent->WaitForOutput("] ready", 120s)) << Logs();
  ASSERT_TRUE(nodes_[1].agent->WaitForOutput("] ready", 120s)) << Logs();
  EXPECT_EQ(NoticeOnNode2(), 75) << Logs();
  for (int n : {1, 2}) {
    EXPECT_NE(nodes_[n].agent->Output().find("asked the trainer's workers for a checkpoint"),
              std::string::npos)
        << Logs();
  }
  const std::vector<RoundEnd> ends = Ends(1);
  ASSERT_FALSE(ends.empty()) << Logs();
  EXPECT_EQ(ends.front().reason, "notice") << "no crash: the launcher lives\n" << Logs();
}

// SIGUSR1, SIGUSR2 and SIGHUP sent to a group node's agent reach its
// trainer, as one node's (docs/agent.md, "Signals"): both take their signals
// in one shell (agent/run/node_shell.h). Before, a group agent logged them and
// dropped them.
TEST_F(GroupDutiesE2E, AStraySignalToTheAgentIsForwardedToItsTrainerAsWithOneNode) {
  const std::string config = JobConfig(2, AskedTrainer("own"));
  StartNode(1, config);
  StartNode(2, config);
  ASSERT_TRUE(nodes_[1].agent->WaitForOutput("] ready", 120s)) << Logs();
  // The "own" trainer marks itself asked (beside its checkpoint dir) on SIGUSR1.
  const std::string asked = DirName(nodes_[1].ckpt) + "/asked";
  ASSERT_FALSE(std::filesystem::exists(asked));
  ASSERT_EQ(::kill(nodes_[1].agent->pid(), SIGUSR1), 0);
  EXPECT_TRUE(WaitFor([&] { return std::filesystem::exists(asked); }, 60s)) << Logs();
  EXPECT_TRUE(nodes_[1].agent->WaitForOutput("received SIGUSR1; forwarded it to the trainer", 30s))
      << Logs();
  EXPECT_FALSE(std::filesystem::exists(DirName(nodes_[2].ckpt) + "/asked"))
      << "node 2's agent got no signal\n"
      << Logs();
}

}  // namespace
}  // namespace sg::testing
