// A real multi-node torchrun job under spotguard (issue 18, docs/multi-node.md):
// three "nodes" on this machine, each an agent of the real binary with its
// own IMDS simulator (own instance id) and checkpoint dir, sharing the Ceph
// gateway; the trainer is examples/ddp_trainer.py under torchrun (gloo, CPU,
// Debian's python3-torch), one process per node, with the `dcp` preset.
//
// The interleaving is driven, never timed: the trainer's test hook holds
// every rank at a chosen step until a checkpoint is asked for
// (--pause-at/--pause-once-dir), and the test waits for states (a pause, a
// group snapshot, an exit). The result it checks, the final model's SHA-256,
// is the same whichever group snapshot a round resumes from, because the
// trainer is deterministic (its doc).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include "agent/repo/store_layout.h"
#include "tests/e2e/multi_node_fixture.h"

namespace sg::testing {
namespace {

const std::string kTrainer = std::string(SPOTGUARD_SOURCE_DIR) + "/examples/ddp_trainer.py";
const std::vector<std::string> kTrainerArgs = {"--steps", "60", "--save-every", "10", "--width",
                                               "64", "--seed", "3", "--timeout", "120"};

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// `pid` and every process below it, read from /proc before any is killed.
std::vector<pid_t> ProcessTree(pid_t pid) {
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto stat = ReadFileToString(e.path().string() + "/stat");
    if (!stat.ok()) continue;
    // "pid (comm) state ppid ...": the comm may hold spaces and parentheses.
    const size_t close = stat->rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat->substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    children[ppid].push_back(std::stoi(name));
  }
  std::vector<pid_t> out = {pid};
  for (size_t i = 0; i < out.size(); ++i) {
    for (pid_t c : children[out[i]]) out.push_back(c);
  }
  return out;
}

class TorchrunGroupE2E : public MultiNodeE2E {
 protected:
  void SetUp() override {
    MultiNodeE2E::SetUp();
    group_port_ = FreePort();
    ASSERT_GT(group_port_, 0);
  }

  std::vector<std::string> Torchrun(const std::string& nnodes, const std::string& node_rank,
                                    const std::string& port) {
    return {SPOTGUARD_PYTHON, "-m", "torch.distributed.run", "--nnodes", nnodes, "--node_rank",
            node_rank, "--master_addr", "127.0.0.1", "--master_port", port, "--nproc_per_node",
            "1", "--redirects", "1", "--tee", "1", kTrainer};
  }

  // The job: ranks pause at step 30 and at step 50, once each.
  std::string Config() {
    nlohmann::json command = Torchrun("{nnodes}", "{node_rank}", "{master_port}");
    command[8] = "{master_addr}";
    for (const std::string& a : kTrainerArgs) command.push_back(a);
    for (const char* a : {"--pause-at", "30", "--pause-at", "50", "--pause-once-dir"}) {
      command.push_back(a);
    }
    command.push_back(dir_.Join("pauses"));
    return JobConfig(3, command, "dcp");
  }

  // The final model's SHA-256 of the same job run by three torchrun
  // launchers without spotguard and without any interruption.
  std::string ReferenceSha() {
    const std::string port = std::to_string(FreePort());
    std::string script = "pids=(); ";
    for (int r = 0; r < 3; ++r) {
      std::string line;
      for (const std::string& a : Torchrun("3", std::to_string(r), port)) line += "'" + a + "' ";
      for (const std::string& a : kTrainerArgs) line += a + " ";
      const std::string out = dir_.Join("reference" + std::to_string(r));
      script += line + "--ckpt-dir '" + out + "' > '" + out + ".log' 2>&1 & pids+=($!); ";
    }
    script += "rc=0; for p in \"${pids[@]}\"; do wait \"$p\" || rc=1; done; exit $rc";
    CommandResult r = RunCommand({"bash", "-c", script}, {}, std::chrono::seconds(300));
    auto log = ReadFileToString(dir_.Join("reference0.log"));
    EXPECT_EQ(r.exit_code, 0) << (log.ok() ? *log : std::string("(no log)"));
    auto sha = ReadFileToString(dir_.Join("reference0/final_model.pt.sha256"));
    return sha.ok() ? std::string(Trim(*sha)) : "(no reference)";
  }

  bool Printed(const std::string& line) { return Logs().find(line) != std::string::npos; }

  // A wait's bound: `most`, and never past the test's own deadline, which
  // lies within its CTest timeout (900 s), so that a stuck run still fails
  // here, with the agents' logs.
  std::chrono::milliseconds Within(std::chrono::milliseconds most) const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline_ - std::chrono::steady_clock::now());
    return std::clamp(left, std::chrono::milliseconds(0), most);
  }
  const std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::now() + 780s;

  // The node whose agent has instance id `instance` ("i-node<N>").
  int NodeOf(const std::string& instance) { return std::stoi(instance.substr(6)); }

  std::optional<RoundPlan> Plan() {
    auto plan = GroupStore(*store_, "job").NewestPlan();
    return plan.ok() ? *plan : std::nullopt;
  }

  // The first round planned after `round`, however many rounds a loaded
  // machine's stalls planned after it (each ended `stale` and re-planned).
  std::optional<RoundPlan> FirstPlanAfter(uint64_t round) {
    const std::optional<RoundPlan> newest = Plan();
    if (!newest) return std::nullopt;
    for (uint64_t r = round + 1; r <= newest->round; ++r) {
      const std::string key = "job/group/rounds/" + SeqName(r) + "/plan.json";
      auto text = static_cast<ObjectStore&>(*store_).Get(key);
      if (!text.ok()) continue;
      auto plan = ParsePlan(*text, key);
      if (plan.ok()) return *plan;
    }
    return std::nullopt;
  }
};

TEST_F(TorchrunGroupE2E, ANoticeAndAKillNineAreRecoveredAndTheModelIsBitIdentical) {
  const std::string reference = ReferenceSha();
  ASSERT_EQ(reference.size(), 64u) << reference;
  const std::string config = Config();
  for (int n : {1, 2, 3}) StartNode(n, config);

  // Round 1: every rank holds at step 30. The notice goes to the round's
  // coordinator, rank 0: every node's trainer saves step 30, the group
  // commits it, the noticed node exits 75, and another member takes over.
  ASSERT_TRUE(WaitFor([&] { return Printed("paused at step 30"); }, Within(240s))) << Logs();
  std::optional<RoundPlan> round1 = Plan();
  ASSERT_TRUE(round1 && round1->members.size() == 3u) << Logs();
  const int noticed = NodeOf(round1->members[0].instance);
  std::vector<int> survivors;
  for (int n : {1, 2, 3}) {
    if (n != noticed) survivors.push_back(n);
  }
  nodes_[noticed].imds->Control("POST", "/_sim/spot-notice",
                                R"({"action": "terminate", "in_seconds": 120})");
  ASSERT_EQ(nodes_[noticed].agent->Wait(Within(150s)), 75) << Logs();
  std::vector<GroupCommit> groups = Groups();
  ASSERT_FALSE(groups.empty()) << Logs();
  EXPECT_EQ(groups.back().step, 30) << "the answer to the notice";
  EXPECT_EQ(groups.back().parts.size(), 3u);
  std::vector<RoundEnd> ends = Ends(1);
  ASSERT_FALSE(ends.empty());
  EXPECT_EQ(ends.front().reason, "notice");
  for (int n : survivors) {
    ASSERT_TRUE(nodes_[n].agent->WaitForOutput("waiting for the next round", Within(60s))) << Logs();
    EXPECT_FALSE(nodes_[n].agent->Wait(0ms).has_value()) << "node " << n << " stays";
  }

  // Round 2: a replacement with an empty disk joins; the group resumes from
  // step 30 and holds at step 50, after the group committed step 40. The
  // coordinator, rank 0, is a member of round 1 (a newcomer leaves that to
  // them: MayCoordinate), so the replacement's rank is another.
  StartNode(4, config);
  ASSERT_TRUE(WaitFor([&] { return Printed("paused at step 50"); }, Within(240s))) << Logs();
  ASSERT_TRUE(WaitFor([&] { return !Groups().empty() && Groups().back().step == 40; }, Within(120s)))
      << Logs();
  std::optional<RoundPlan> round2 = Plan();
  ASSERT_TRUE(round2);
  ASSERT_EQ(round2->members.size(), 3u);
  const int master = NodeOf(round2->members[0].instance);
  ASSERT_TRUE(master == survivors[0] || master == survivors[1])
      << "the coordinator of round 2 is node " << master << "\n" << Logs();
  EXPECT_TRUE(NodeOf(round2->members[1].instance) == 4 || NodeOf(round2->members[2].instance) == 4)
      << "node 4 has a rank other than 0";
  // Node 4's part came from the store, with rank 0's .metadata beside it
  // (DCP's reader needs it on every node).
  EXPECT_TRUE(nodes_[4].agent->WaitForOutput("restored rank", 0ms)) << Logs();
  auto own = ReadFileToString(nodes_[4].ckpt + "/step_30/.metadata");
  auto masters = ReadFileToString(nodes_[master].ckpt + "/step_30/.metadata");
  ASSERT_TRUE(own.ok() && masters.ok()) << Logs();
  EXPECT_EQ(*own, *masters);

  // kill -9 of round 2's coordinator, agent and trainer, with no notice:
  // the round ends, another member takes the lease once it expires, and the
  // group waits; a replacement joins and the group resumes from the last
  // group snapshot, step 40 (no group snapshot can be newer: the killed
  // node's part of any later step is never written).
  const std::vector<pid_t> tree = ProcessTree(nodes_[master].agent->pid());
  ASSERT_GE(tree.size(), 2u) << "the agent and its trainer";
  for (pid_t p : tree) ::kill(p, SIGKILL);
  EXPECT_EQ(nodes_[master].agent->Wait(Within(30s)), 128 + SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return !Ends(round2->round).empty(); }, Within(120s))) << Logs();
  StartNode(5, config);
  const int kept = master == survivors[0] ? survivors[1] : survivors[0];
  const std::vector<int> finishers = {kept, 4, 5};
  for (int n : finishers) ASSERT_EQ(nodes_[n].agent->Wait(Within(300s)), 0) << Logs();
  // The first round after round 2 resumed step 40, and every node that
  // completed restored it (retention may have deleted that group snapshot
  // since: the agents' logs say it). Later rounds, if a loaded machine's
  // stall ended one, resume later snapshots: the test does not assume that
  // the last plan is that first one.
  std::optional<RoundPlan> next = FirstPlanAfter(round2->round);
  ASSERT_TRUE(next && next->resume_seq) << Logs();
  const std::string restored = "part of group snapshot " + SeqName(*next->resume_seq) + " (step 40)";
  for (int n : finishers) {
    EXPECT_TRUE(nodes_[n].agent->WaitForOutput(restored, 0ms)) << restored << "\n" << Logs();
  }
  EXPECT_TRUE(store_->Head("job/complete").ok());

  // The model is the uninterrupted run's, bit for bit.
  std::vector<std::string> finals;
  for (int n : finishers) {
    auto sha = ReadFileToString(nodes_[n].ckpt + "/final_model.pt.sha256");
    if (sha.ok()) finals.push_back(std::string(Trim(*sha)));
  }
  EXPECT_EQ(finals, std::vector<std::string>{reference}) << Logs();
}

}  // namespace
}  // namespace sg::testing
