// The engine's identity of a run (docs/config.md, "Placeholders"): {index}
// from AWS_BATCH_JOB_ARRAY_INDEX or JOB_COMPLETION_INDEX, the attempt from
// AWS_BATCH_JOB_ATTEMPT, in `job`, `command` and `resume_args`.
#include "agent/config/engine_identity.h"

#include <gtest/gtest.h>

#include "agent/config/config.h"
#include "agent/trainer/supervisor.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

class EngineIdentityTest : public ::testing::Test {
 protected:
  ConfigResult Load(const std::string& file_text, std::map<std::string, std::string> env) {
    ConfigSources s;
    s.file = dir_.WriteFile("job.json", file_text);
    s.env = std::move(env);
    return LoadConfig(s, ConfigNeeds{});
  }
  static std::string AllProblems(const ConfigResult& r) {
    std::string out;
    for (const auto& p : r.problems) out += p.message + "\n";
    return out;
  }
  testing::TempDir dir_;
};

TEST_F(EngineIdentityTest, TheBatchArrayIndexComesFirstThenTheCompletionIndex) {
  auto both =
      ReadEngineIdentity({{"AWS_BATCH_JOB_ARRAY_INDEX", "7"}, {"JOB_COMPLETION_INDEX", "3"}});
  EXPECT_TRUE(both.problems.empty());
  EXPECT_EQ(both.identity.index, 7);
  EXPECT_EQ(both.identity.index_var, "AWS_BATCH_JOB_ARRAY_INDEX");
  auto k8s = ReadEngineIdentity({{"JOB_COMPLETION_INDEX", "3"}, {"AWS_BATCH_JOB_ARRAY_INDEX", ""}});
  EXPECT_EQ(k8s.identity.index, 3);
  EXPECT_EQ(k8s.identity.index_var, "JOB_COMPLETION_INDEX");
  EXPECT_FALSE(ReadEngineIdentity({}).identity.index.has_value());
  EXPECT_FALSE(ReadEngineIdentity({}).identity.attempt.has_value());
}

TEST_F(EngineIdentityTest, MalformedVariablesAreRefusedByName) {
  auto r =
      ReadEngineIdentity({{"AWS_BATCH_JOB_ARRAY_INDEX", "-1"}, {"AWS_BATCH_JOB_ATTEMPT", "0"}});
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_NE(r.problems[0].find("AWS_BATCH_JOB_ARRAY_INDEX must be a whole number >= 0, got \"-1\""),
            std::string::npos);
  EXPECT_NE(r.problems[1].find("AWS_BATCH_JOB_ATTEMPT must be a whole number >= 1, got \"0\""),
            std::string::npos);
  EXPECT_EQ(ReadEngineIdentity({{"JOB_COMPLETION_INDEX", "1x"}}).problems.size(), 1u);
  EXPECT_EQ(ReadEngineIdentity({{"AWS_BATCH_JOB_ATTEMPT", " 2"}}).problems.size(), 1u);
}

TEST_F(EngineIdentityTest, IndexInTheJobNameGivesEachChildItsOwnPrefix) {
  const std::string file =
      R"({"job": "sweep-{index}", "command": ["train", "--lr-index", "{index}"],
                               "resume_args": ["--resume", "{resume}", "--child={index}"]})";
  auto r = Load(file, {{"AWS_BATCH_JOB_ARRAY_INDEX", "7"}, {"AWS_BATCH_JOB_ATTEMPT", "2"}});
  ASSERT_TRUE(r.ok()) << AllProblems(r);
  EXPECT_EQ(r.config.job, "sweep-7");
  EXPECT_EQ(r.config.index, 7);
  EXPECT_EQ(r.config.engine_attempt, 2);
  TrainerLaunch launch;
  launch.resume = "/ckpt/step_10.ckpt";
  launch.attempt = 1;
  EXPECT_EQ(TrainerArgv(r.config, launch),
            (std::vector<std::string>{"train", "--lr-index", "7", "--resume", "/ckpt/step_10.ckpt",
                                      "--child=7"}));
  auto env = TrainerEnvironment({}, r.config, launch, "/n");
  EXPECT_EQ(env["SPOTGUARD_INDEX"], "7");
  EXPECT_EQ(env["SPOTGUARD_ATTEMPT"], "2") << "the engine's attempt, not the start in this run";
  EXPECT_EQ(env["SPOTGUARD_JOB"], "sweep-7");

  auto k8s = Load(file, {{"JOB_COMPLETION_INDEX", "0"}});
  ASSERT_TRUE(k8s.ok()) << AllProblems(k8s);
  EXPECT_EQ(k8s.config.job, "sweep-0");
  EXPECT_FALSE(k8s.config.engine_attempt.has_value());
  launch.attempt = 3;
  EXPECT_EQ(TrainerEnvironment({}, k8s.config, launch, "/n")["SPOTGUARD_ATTEMPT"], "3")
      << "without the engine's attempt, the trainer's start in this run";
}

TEST_F(EngineIdentityTest, IndexWithoutAnEngineVariableIsRefusedNamingBoth) {
  for (const std::string file :
       {R"({"job": "sweep-{index}"})", R"({"job": "j", "command": ["train", "{index}"]})",
        R"({"job": "j", "resume_args": ["--child={index}"]})"}) {
    auto r = Load(file, {});
    ASSERT_FALSE(r.ok()) << file;
    const std::string all = AllProblems(r);
    EXPECT_NE(all.find("uses {index}, but neither AWS_BATCH_JOB_ARRAY_INDEX nor "
                       "JOB_COMPLETION_INDEX is set"),
              std::string::npos)
        << all;
    EXPECT_EQ(all.find("must be 1-128 letters"), std::string::npos) << "said once: " << all;
  }
  // A literal "{index}" is still possible in the command.
  auto literal = Load(R"({"job": "j", "command": ["echo", "{{index}}"]})", {});
  ASSERT_TRUE(literal.ok()) << AllProblems(literal);
  EXPECT_EQ(TrainerArgv(literal.config, TrainerLaunch{})[1], "{index}");
}

TEST_F(EngineIdentityTest, AMalformedEngineVariableIsAConfigProblem) {
  auto r = Load(R"({"job": "sweep-{index}"})", {{"AWS_BATCH_JOB_ARRAY_INDEX", "seven"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(AllProblems(r).find("AWS_BATCH_JOB_ARRAY_INDEX must be a whole number"),
            std::string::npos)
      << AllProblems(r);
}

}  // namespace
}  // namespace sg
