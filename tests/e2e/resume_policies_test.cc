// The resume policies end to end (docs/agent.md): the spotguard binary, a
// stand-in trainer and a file:// store. A snapshot the trainer crashes on at
// every resume is marked suspect and the job falls back to the one before
// it and completes; an exit 0 that complete_when does not accept is not a
// completion.
#include <gtest/gtest.h>

#include <filesystem>

#include "agent/repo/snapshot_writer.h"
#include "agent/repo/store_layout.h"
#include "tests/e2e/file_store_agent_fixture.h"
#include "tests/support/capture_in_place.h"
#include "tests/support/fake_clock.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

// $1: the resume path ("" when fresh), $2: the checkpoint dir, $3: the step
// to stop at, or "+N": N steps after the one resumed from. Exits 3 when the
// checkpoint to resume from is poisoned; else writes one checkpoint per
// step, each renamed into place, and exits 0.
constexpr const char* kTrainer = R"(
resume="$1"; dir="$2"; last="$3"
echo "resuming from ${resume:-nothing}"
step=0
if [ -n "$resume" ]; then
  if grep -q POISON "$resume"; then echo "cannot load $resume: poisoned" >&2; exit 3; fi
  step=$(basename "$resume" .bin | sed 's/^step-//')
fi
case "$last" in +*) last=$((step + ${last#+})) ;; esac
while [ "$step" -lt "$last" ]; do
  step=$((step + 1))
  sleep 0.4
  echo "good $step" > "$dir/next.tmp" && mv "$dir/next.tmp" "$dir/step-$step.bin"
done
echo "done at step $step"
)";

class ResumePolicies : public FileStoreAgentTest {
 protected:
  // Commits `content` as step-`step`.bin, the next snapshot of "job".
  uint64_t Commit(int64_t step, const std::string& content) {
    const std::string name = "step-" + std::to_string(step) + ".bin";
    const std::string src = dir_.Join("src-" + std::to_string(step));
    WriteTree(src, {{name, {content}}});
    auto capture = CaptureTree(src, step, name);
    EXPECT_TRUE(capture.ok()) << capture.status().ToString();
    FakeClock clock;
    SnapshotRequest request;
    request.job = "job";
    request.instance = "i-seed";
    auto r = SnapshotWriter(*store_, clock, SnapshotOptions{}).Write(*capture, request);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->seq : 0;
  }

  std::string Config(const std::string& last_step, const nlohmann::json& overrides) {
    const std::string script = dir_.WriteFile("trainer.sh", kTrainer);
    nlohmann::json o = {{"restart", {{"max", 3}, {"backoff", "1s"}, {"max_backoff", "1s"}}}};
    for (const auto& [k, v] : overrides.items()) o[k] = v;
    return WriteConfig("job",
                       {"/bin/sh", script, "{resume}", "{checkpoint_dir}", last_step},
                       o);
  }

  bool Exists(const std::string& key) {
    return static_cast<ObjectStore&>(*store_).Head(key).ok();
  }
};

TEST_F(ResumePolicies, ASnapshotTheTrainerCrashesOnIsMarkedSuspectAndTheJobFallsBackAndCompletes) {
  const uint64_t good = Commit(1, "good 1");
  const uint64_t bad = Commit(2, "POISON");
  const std::string ckpt = dir_.Join("ckpt");
  auto agent = StartAgent("job", Config("4", {}), ckpt);
  const auto code = agent->Wait(std::chrono::seconds(90));
  ASSERT_TRUE(code.has_value()) << agent->Output();
  EXPECT_EQ(*code, 0) << agent->Output();
  const std::string out = agent->Output();
  EXPECT_NE(out.find("the trainer failed 2 times after resuming from snapshot " + SeqName(bad)),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("restored snapshot " + SeqName(good)), std::string::npos) << out;
  EXPECT_NE(out.find("job job is complete"), std::string::npos) << out;
  // The mark, with the exits and the trainer's last lines.
  auto mark = static_cast<ObjectStore&>(*store_).Get(SuspectKey("job", bad));
  ASSERT_TRUE(mark.ok()) << mark.status().ToString();
  auto j = nlohmann::json::parse(*mark);
  EXPECT_EQ(j["exits"], (std::vector<std::string>{"exit code 3", "exit code 3"}));
  EXPECT_NE(j["last_lines"].dump().find("poisoned"), std::string::npos) << j.dump();
  EXPECT_FALSE(Exists(SuspectKey("job", good)));
  // The local copy of the bad snapshot is kept beside the checkpoint dir.
  EXPECT_EQ(Contents(ckpt + ".spotguard-suspect-" + SeqName(bad) + "/step-2.bin"), "POISON");
  EXPECT_NE(out.find("moved it to " + ckpt + ".spotguard-suspect-" + SeqName(bad)),
            std::string::npos)
      << out;
  // The job went on from step 1 and finished at step 4.
  EXPECT_EQ(Contents(ckpt + "/step-4.bin"), "good 4\n");
  EXPECT_TRUE(Exists(CompleteKey("job")));

  // `ls` and `status` show the mark; `unsuspect` clears it.
  const std::string cfg = dir_.Join("job.json");
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin() + 1, {"-c", cfg});
    AgentProcess p(args, {{"SPOTGUARD_CONFIG", ""}}, dir_.Join(args[0] + ".out"));
    const auto rc = p.Wait(std::chrono::seconds(30));
    return std::pair<int, std::string>(rc.value_or(-1), p.Output());
  };
  auto [ls_rc, ls] = run({"ls", "--json"});
  ASSERT_EQ(ls_rc, 0) << ls;
  const auto rows = nlohmann::json::parse(ls.substr(ls.find('[')));
  bool seen = false;
  for (const auto& row : rows) {
    if (row["seq"] == bad) {
      EXPECT_TRUE(row["suspect"].get<bool>());
      seen = true;
    } else {
      EXPECT_FALSE(row["suspect"].get<bool>()) << row.dump();
    }
  }
  EXPECT_TRUE(seen) << ls;
  auto [status_rc, status] = run({"status"});
  EXPECT_NE(status.find("\nsuspect          " + SeqName(bad) + ": the trainer could not resume"),
            std::string::npos)
      << status;
  auto [clear_rc, cleared] = run({"unsuspect", std::to_string(bad)});
  EXPECT_EQ(clear_rc, 0) << cleared;
  EXPECT_FALSE(Exists(SuspectKey("job", bad)));
  auto [again_rc, again] = run({"unsuspect", std::to_string(bad)});
  EXPECT_EQ(again_rc, 3) << again;
}

TEST_F(ResumePolicies, AnExit0BelowCompleteWhenIsRestartedFromTheNewestAndCompletesOnlyWhenEarned) {
  // Each run writes one more checkpoint and exits 0; step 3 is required.
  const std::string ckpt = dir_.Join("ckpt");
  auto agent =
      StartAgent("job", Config("+1", {{"complete_when", {{"step_at_least", 3}}}}), ckpt);
  const auto code = agent->Wait(std::chrono::seconds(90));
  ASSERT_TRUE(code.has_value()) << agent->Output();
  const std::string out = agent->Output();
  EXPECT_EQ(*code, 0) << out;
  for (const char* step : {"1", "2"}) {
    EXPECT_NE(out.find(std::string("the trainer exited 0 at step ") + step +
                       ", below step_at_least 3: not complete (complete_when)"),
              std::string::npos)
        << out;
  }
  EXPECT_NE(out.find("resuming from " + ckpt + "/step-2.bin"), std::string::npos) << out;
  auto marker = static_cast<ObjectStore&>(*store_).Get(CompleteKey("job"));
  ASSERT_TRUE(marker.ok()) << out;
  EXPECT_EQ(nlohmann::json::parse(*marker)["step"], 3) << *marker;
}

TEST_F(ResumePolicies, AJobWhoseTrainerExits0BelowCompleteWhenIsNeverMarkedComplete) {
  auto agent = StartAgent("job",
                          Config("1", {{"complete_when", {{"step_at_least", 100}}},
                                       {"restart", {{"max", 0}}}}),
                          dir_.Join("ckpt"));
  const auto code = agent->Wait(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value()) << agent->Output();
  const std::string out = agent->Output();
  EXPECT_NE(out.find("the trainer exited 0 at step 1, below step_at_least 100: not complete"),
            std::string::npos)
      << out;
  EXPECT_EQ(*code, 1) << out;  // no restart left: failed, not complete
  EXPECT_FALSE(Exists(CompleteKey("job")));
  EXPECT_EQ(out.find("job job is complete"), std::string::npos) << out;
}

}  // namespace
}  // namespace sg::testing
