// A sweep rehearsal (docs/agent.md, "Running under AWS Batch, Kubernetes or
// ECS"): four children of an array job, each `spotguard run` as PID 1 of its
// own PID namespace with AWS_BATCH_JOB_ARRAY_INDEX set and a job name with
// {index}, against the Ceph gateway. The test plays the engine: it reruns
// exactly the attempts that exited 75, as a retry strategy on exit 75 does.
//
// The interruptions are driven by events, never by timing: the children to
// interrupt hold at step 60 (the example trainer's --hold-at) until the test
// has seen step 60 committed and interrupted them.
#include <signal.h>

#include <regex>
#include <set>

#include "tests/e2e/fleet_fixture.h"

namespace sg::testing {
namespace {

constexpr int kChildren = 4;
constexpr int kNoticed = 1;    // interrupted by a spot notice
constexpr int kSigtermed = 2;  // interrupted by SIGTERM (docker stop, ECS draining)
constexpr int kHoldAt = 60;

class Sweep : public FleetE2E {
 protected:
  std::string SweepConfig() {
    const nlohmann::json command = {SPOTGUARD_PYTHON,
                                    SPOTGUARD_SOURCE_DIR "/examples/simple_trainer.py",
                                    "--out",
                                    "{checkpoint_dir}",
                                    "--steps",
                                    "100",
                                    "--step-seconds",
                                    "0.01",
                                    "--checkpoint-every",
                                    "20",
                                    "--hold-at",
                                    std::to_string(kHoldAt),
                                    "--hold-file",
                                    dir_.Join("release-{index}")};
    return WriteConfig("sweep", "sweep-{index}", command);
  }
  static std::string Job(int index) { return "sweep-" + std::to_string(index); }
  void Release(int index) { (void)dir_.WriteFile("release-" + std::to_string(index), ""); }

  std::unique_ptr<AgentProcess> StartChild(int index, int attempt, const ImdsSimulator& imds) {
    const std::string name =
        "child-" + std::to_string(index) + "-attempt-" + std::to_string(attempt);
    return StartInNamespace(name, config_, "ckpt-" + name, imds.endpoint(),
                            {{"AWS_BATCH_JOB_ARRAY_INDEX", std::to_string(index)},
                             {"AWS_BATCH_JOB_ATTEMPT", std::to_string(attempt)}});
  }

  static int Count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  std::string config_;
};

TEST_F(Sweep, EveryChildCompletesOnceUnderItsOwnPrefixAndRetriedChildrenResume) {
  ImdsSimulator quiet, noticed;
  config_ = SweepConfig();
  for (int i = 0; i < kChildren; ++i) {
    if (i != kNoticed && i != kSigtermed) Release(i);
  }

  // Attempt 1 of every child, at once.
  std::vector<std::unique_ptr<AgentProcess>> first;
  for (int i = 0; i < kChildren; ++i)
    first.push_back(StartChild(i, 1, i == kNoticed ? noticed : quiet));
  for (int i : {kNoticed, kSigtermed}) {
    ASSERT_TRUE(WaitFor([&] { return NewestCommittedStep(Job(i)) == kHoldAt; }, 60s))
        << first[i]->Output();
  }
  noticed.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 100})");
  const pid_t sigtermed = AgentPid(*first[kSigtermed]);
  ASSERT_GT(sigtermed, 0);
  ASSERT_EQ(::kill(sigtermed, SIGTERM), 0);

  // The engine: exit 0 is done, 75 is retried, anything else fails the child.
  std::map<int, std::string> logs;  // every attempt's output, per child
  std::vector<int> retry;
  for (int i = 0; i < kChildren; ++i) {
    const auto code = first[i]->Wait(60s);
    ASSERT_TRUE(code.has_value()) << "child " << i << "\n" << first[i]->Output();
    logs[i] += first[i]->Output();
    if (*code == 75) {
      retry.push_back(i);
    } else {
      EXPECT_EQ(*code, 0) << "child " << i << "\n" << first[i]->Output();
    }
  }
  ASSERT_EQ(retry, (std::vector<int>{kNoticed, kSigtermed}));

  // Attempt 2 of exactly those, on a fresh disk (another instance).
  std::map<int, int64_t> stopped_at;
  for (int i : retry) {
    stopped_at[i] = NewestCommittedStep(Job(i));
    EXPECT_GT(stopped_at[i], kHoldAt) << "the interruption's own checkpoint was committed";
    Release(i);
  }
  std::vector<std::unique_ptr<AgentProcess>> second;
  for (int i : retry) second.push_back(StartChild(i, 2, quiet));
  for (size_t k = 0; k < retry.size(); ++k) {
    const int i = retry[k];
    const auto code = second[k]->Wait(60s);
    ASSERT_TRUE(code.has_value()) << second[k]->Output();
    EXPECT_EQ(*code, 0) << "child " << i << " attempt 2\n" << second[k]->Output();
    logs[i] += second[k]->Output();
    std::smatch m;
    const std::string out = second[k]->Output();
    ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(resumed from \S+ at step (\d+))"))) << out;
    EXPECT_EQ(std::stoll(m[1]), stopped_at[i]) << "attempt 2 continues where attempt 1 stopped";
  }

  for (int i = 0; i < kChildren; ++i) {
    SCOPED_TRACE("child " + std::to_string(i));
    EXPECT_EQ(Count(logs[i], "training complete"), 1) << logs[i];
    EXPECT_TRUE(store_->Head(CompleteKey(Job(i))).ok());
    int completes = 0;
    std::set<int64_t> attempts;
    for (const nlohmann::json& e : Events(Job(i))) {
      if (e["kind"] == "complete") ++completes;
      EXPECT_EQ(e.value("index", -1), i) << e.dump();
      attempts.insert(e.value("attempt", -1));
    }
    EXPECT_EQ(completes, 1);
    const bool retried = i == kNoticed || i == kSigtermed;
    const std::set<int64_t> want = retried ? std::set<int64_t>{1, 2} : std::set<int64_t>{1};
    EXPECT_EQ(attempts, want);
    for (uint64_t seq : Committed(Job(i))) {
      const Manifest m = ManifestOf(Job(i), seq);
      EXPECT_EQ(m.job, Job(i));
      EXPECT_EQ(m.index, i);
    }
  }

  // What `ls` and `status` say of a retried child.
  const std::map<std::string, std::string> env = {
      {"AWS_ACCESS_KEY_ID", s3_.access_key},
      {"AWS_SECRET_ACCESS_KEY", s3_.secret_key},
      {"SPOTGUARD_CONFIG", ""},
      {"AWS_BATCH_JOB_ARRAY_INDEX", std::to_string(kNoticed)},
      {"AWS_BATCH_JOB_ATTEMPT", ""},
      {"JOB_COMPLETION_INDEX", ""}};
  auto ls = RunCommand({SPOTGUARD_BIN, "ls", "-c", config_, "--json"}, env);
  ASSERT_EQ(ls.exit_code, 0) << ls.out << ls.err;
  std::set<int64_t> ls_attempts;
  for (const auto& row : nlohmann::json::parse(ls.out)) {
    EXPECT_EQ(row["index"], kNoticed) << row.dump();
    ls_attempts.insert(row["attempt"].get<int64_t>());
  }
  EXPECT_TRUE(ls_attempts.count(2)) << ls.out;
  auto ls_text = RunCommand({SPOTGUARD_BIN, "ls", "-c", config_}, env);
  EXPECT_NE(ls_text.out.find("INDEX  ATTEMPT"), std::string::npos) << ls_text.out;
  auto status = RunCommand({SPOTGUARD_BIN, "status", "-c", config_, "--json"}, env);
  ASSERT_EQ(status.exit_code, 0) << status.out << status.err;
  const auto st = nlohmann::json::parse(status.out);
  EXPECT_EQ(st["job"], Job(kNoticed));
  EXPECT_EQ(st["engine"]["index"], kNoticed) << status.out;
  EXPECT_EQ(st["engine"]["attempt"], 2) << status.out;
  auto status_text = RunCommand({SPOTGUARD_BIN, "status", "-c", config_}, env);
  EXPECT_NE(status_text.out.find("index 1, attempt 2"), std::string::npos) << status_text.out;

  // A third run of a completed child exits 0 at once, without its trainer.
  auto third = StartChild(0, 3, quiet);
  const auto code = third->Wait(60s);
  ASSERT_TRUE(code.has_value()) << third->Output();
  EXPECT_EQ(*code, 0) << third->Output();
  EXPECT_NE(third->Output().find("is already complete; not starting it again"), std::string::npos)
      << third->Output();
  EXPECT_EQ(third->Output().find("started the trainer"), std::string::npos) << third->Output();
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("ckpt-child-0-attempt-3/step_000100.ckpt")));
}

}  // namespace
}  // namespace sg::testing
