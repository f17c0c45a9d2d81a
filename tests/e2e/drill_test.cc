// `spotguard drill` on the bundled example trainer, as the quickstart runs it.
#include <gtest/gtest.h>

#include <regex>

#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

TEST(Drill, TheExampleJobSurvivesAnInterruptionAndReportsIt) {
  TempDir dir;
  const std::string config = dir.WriteFile("drill.json", R"({
    "preset": "generic", "patterns": ["step_*.ckpt"], "checkpoint_signal": "SIGUSR1",
    "settle_time": "300ms", "upload_interval": "1s", "imds": {"poll_interval": "200ms"},
    "command": [")" SPOTGUARD_PYTHON R"(", ")" SPOTGUARD_SOURCE_DIR R"(/examples/simple_trainer.py",
                "--out", "{checkpoint_dir}", "--steps", "100000", "--step-seconds", "0.02",
                "--checkpoint-every", "50"],
    "resume_args": ["--resume", "{resume}"]})");
  auto r = RunCommand({SPOTGUARD_BIN, "drill", "--after", "10s", "-c", config},
                      {{"SPOTGUARD_LOG_LEVEL", "warn"}, {"SPOTGUARD_CONFIG", ""}},
                      std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("SURVIVED"), std::string::npos) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(step committed after the notice\s+(\d+))")))
      << r.out;
  const long committed = std::stol(m[1]);
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(resumed from step\s+(\d+))"))) << r.out;
  EXPECT_EQ(std::stol(m[1]), committed) << "the replacement resumes where the commit left off";
  EXPECT_GT(committed, 0);
  EXPECT_NE(r.out.find("notice to commit"), std::string::npos);
  EXPECT_NE(r.err.find("INTERRUPTION NOTICE"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace sg::testing
