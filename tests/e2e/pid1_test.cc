// The agent as PID 1 of a container (docs/design.md §11, "PID 1"): it reaps
// the orphans its trainer leaves behind, forwards a stop to the trainer's
// process group, snapshots on SIGTERM and exits 75 (docs/design.md §2), also
// when the metadata service cannot be reached from the container.
#include <signal.h>

#include "tests/e2e/fleet_fixture.h"

namespace sg::testing {
namespace {

// A trainer that leaves orphans behind: a shell that backgrounds five
// subshells and exits; once told to, they end, as zombies of PID 1 unless
// PID 1 reaps them.
// It checks from inside the namespace that they were reparented to PID 1 and
// are gone (not zombies), then writes `report`, a checkpoint, and waits. A
// member of its group notes the stop signal; on SIGTERM it saves a last
// checkpoint and exits.
constexpr char kOrphaningTrainer[] = R"PY(
import json, os, signal, subprocess, sys, time
out, report = sys.argv[1], sys.argv[2]
stop = False
def on_term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
def save(step):
    tmp = os.path.join(out, ".tmp")
    with open(tmp, "w") as f:
        json.dump({"step": step}, f)
    os.rename(tmp, os.path.join(out, "step_%06d.ckpt" % step))
def stat(pid):
    try:
        s = open("/proc/%d/stat" % pid).read()
    except OSError:
        return None
    rest = s[s.rfind(")") + 2:].split()
    return rest[0], int(rest[1])
os.makedirs(out, exist_ok=True)
member = subprocess.Popen(["sh", "-c", "trap 'echo TERM > %s/member; exit 0' TERM; "
                           "while :; do sleep 0.05; done" % report])
go = os.path.join(report, "go")
orphans = [int(p) for p in subprocess.run(
    ["sh", "-c", "for i in 1 2 3 4 5; do (while [ ! -e %s ]; do sleep 0.01; done) >/dev/null 2>&1 & "
     "echo $!; done; exit 0" % go], capture_output=True, text=True).stdout.split()]
# Their parent has exited: they are orphans now, and wait for `go`.
adopted = [p for p in orphans if (stat(p) or ("", 0))[1] == 1]
open(go, "w").close()
while any(stat(p) is not None for p in orphans):
    time.sleep(0.02)
zombies = [p for p in map(int, filter(str.isdigit, os.listdir("/proc")))
           if (st := stat(p)) and st[0] == "Z" and st[1] == 1]
with open(os.path.join(report, "reaped.json"), "w") as f:
    json.dump({"pid": os.getpid(), "orphans": len(orphans), "adopted_by_pid1": len(adopted),
               "zombies": zombies}, f)
save(1)
while not stop:
    time.sleep(0.02)
save(2)
)PY";

class Pid1 : public FleetE2E {
 protected:
  nlohmann::json Trainer() {
    const std::string script = dir_.WriteFile("orphaning_trainer.py", kOrphaningTrainer);
    std::filesystem::create_directories(dir_.Join("report"));
    return {SPOTGUARD_PYTHON, script, "{checkpoint_dir}", dir_.Join("report")};
  }
};

TEST_F(Pid1, ReapsTheTrainersOrphansForwardsTheStopAndExits75AfterTheLastSnapshot) {
  ImdsSimulator imds;
  const std::string config = WriteConfig("a", "pid1", Trainer(), {{"checkpoint_signal", "none"}});
  auto a = StartInNamespace("a", config, "ckpt", imds.endpoint());
  const std::string report = dir_.Join("report/reaped.json");
  // Only PID 1 can reap the orphans: without it the trainer waits forever.
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(report); }, 60s)) << a->Output();
  EXPECT_NE(a->Output().find("running as PID 1"), std::string::npos) << a->Output();
  const auto seen = nlohmann::json::parse(*ReadFileToString(report));
  EXPECT_EQ(seen["orphans"], 5) << seen.dump();
  EXPECT_EQ(seen["adopted_by_pid1"], 5) << "the orphans became PID 1's children: " << seen.dump();
  EXPECT_EQ(seen["zombies"].size(), 0u) << "zombies left in the namespace: " << seen.dump();
  ASSERT_TRUE(WaitFor([&] { return NewestCommittedStep("pid1") == 1; }, 60s)) << a->Output();

  const pid_t agent = AgentPid(*a);
  ASSERT_GT(agent, 0);
  ASSERT_EQ(::kill(agent, SIGTERM), 0);
  const auto code = a->Wait(60s);
  ASSERT_TRUE(code.has_value()) << a->Output();
  EXPECT_EQ(*code, 75) << "stopped before completion\n" << a->Output();
  EXPECT_EQ(NewestCommittedStep("pid1"), 2) << "the checkpoint saved on the stop\n" << a->Output();
  auto member = ReadFileToString(dir_.Join("report/member"));
  EXPECT_TRUE(member.ok() && *member == "TERM\n") << "the stop reached the trainer's whole group\n"
                                                  << a->Output();
}

// Inside a container on an instance whose metadata hop limit is 1, the token
// PUT's answer never arrives: no notice can be seen, but SIGTERM (docker
// stop, ECS draining) still gets its snapshot and exit 75.
TEST_F(Pid1, WithMetadataUnreachableSigtermStillGetsTheSnapshot) {
  ImdsSimulator imds;
  imds.Control("POST", "/_sim/metadata-options", R"({"hop_limit": 1, "hops": 2})");
  const std::string config =
      WriteConfig("a", "no-imds", Trainer(), {{"checkpoint_signal", "none"}});
  auto a = StartInNamespace("a", config, "ckpt", imds.endpoint());
  ASSERT_TRUE(WaitFor([&] { return NewestCommittedStep("no-imds") == 1; }, 60s)) << a->Output();
  const pid_t agent = AgentPid(*a);
  ASSERT_GT(agent, 0);
  ASSERT_EQ(::kill(agent, SIGTERM), 0);
  const auto code = a->Wait(90s);
  ASSERT_TRUE(code.has_value()) << a->Output();
  EXPECT_EQ(*code, 75) << a->Output();
  EXPECT_EQ(NewestCommittedStep("no-imds"), 2) << a->Output();
  // The simulator saw the token requests and answered none.
  bool dropped = false;
  for (const auto& q : nlohmann::json::parse(imds.Control("GET", "/_sim/requests"))) {
    if (q["fault"] == "hop-limit") dropped = true;
  }
  EXPECT_TRUE(dropped);
}

}  // namespace
}  // namespace sg::testing
