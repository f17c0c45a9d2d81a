// The spotguard binary, run as users run it.
#include <filesystem>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

using testing::CommandResult;
using testing::RunCommand;

const char* const kSubcommands[] = {"run",   "restore", "snapshot", "ls",     "verify",
                                    "gc",    "status",  "watch",    "drill",  "doctor",
                                    "reset-failure", "report"};

CommandResult Spotguard(std::vector<std::string> args,
                        std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), SPOTGUARD_BIN);
  return RunCommand(args, env);
}

TEST(Cli, VersionPrintsTheVersion) {
  auto r = Spotguard({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, std::string("spotguard ") + SPOTGUARD_VERSION + "\n");
}

TEST(Cli, HelpListsEverySubcommandAndTheExitCodes) {
  auto r = Spotguard({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* sub : kSubcommands) {
    EXPECT_NE(r.out.find(std::string("\n  ") + sub + " "), std::string::npos) << sub;
  }
  EXPECT_NE(r.out.find("75 stopped before completion (notice, SIGTERM)"), std::string::npos)
      << r.out;
}

TEST(Cli, EverySubcommandHasItsOwnHelp) {
  for (const char* sub : kSubcommands) {
    auto r = Spotguard({sub, "--help"});
    EXPECT_EQ(r.exit_code, 0) << sub;
    EXPECT_NE(r.out.find(std::string("Usage: spotguard ") + sub), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--store URL"), std::string::npos) << sub;
  }
}

TEST(Cli, AConfigWithThreeMistakesExitsTwoNamingAllThree) {
  testing::TempDir dir;
  const std::string config = dir.WriteFile("job.json", R"({
    // a typo, a bad duration and an impossible retention
    "job": "resnet",
    "checkpoint_dir": "/data/ckpt",
    "command": ["python3", "train.py"],
    "uplaod_interval": "5m",
    "stop_grace": "a minute",
    "keep": 0
  })");
  auto r = Spotguard({"run", "-c", config});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("3 problems"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("uplaod_interval: unknown key"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean \"upload_interval\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stop_grace: \"a minute\" is not a duration"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("keep: must be at least 1, got 0"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(Cli, RunWithoutAJobOrCommandExitsTwo) {
  auto r = Spotguard({"run"}, {{"SPOTGUARD_CONFIG", ""}, {"SPOTGUARD_JOB", ""}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("job: is required"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("command: is required"), std::string::npos) << r.err;
}

TEST(Cli, UnknownSubcommandsAndFlagsAreUsageErrors) {
  EXPECT_EQ(Spotguard({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(Spotguard({"ls", "--no-such-flag"}).exit_code, 2);
  EXPECT_EQ(Spotguard({}).exit_code, 2);
}

TEST(Cli, PrintConfigShowsPrecedenceAndRedactsSecrets) {
  testing::TempDir dir;
  const std::string config = dir.WriteFile("job.json", R"({"job": "from-file", "keep": 4,
      "store": "file:///from/file", "endpoint": "https://user:hunter2@s3.internal"})");
  auto r = Spotguard({"run", "--print-config", "--config", config, "--job", "from-flag", "--",
                      "python3", "train.py", "--api-token=abc123"},
                     {{"SPOTGUARD_JOB", "from-env"}, {"SPOTGUARD_STORE", "file:///from/env"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["job"], "from-flag");
  EXPECT_EQ(j["store"], "file:///from/env");
  EXPECT_EQ(j["keep"], 4);
  EXPECT_EQ(j["command"][2], "--api-token=<redacted>");
  EXPECT_EQ(r.out.find("hunter2"), std::string::npos);
  EXPECT_EQ(r.out.find("abc123"), std::string::npos);
}

TEST(Cli, ConfigFileComesFromTheEnvironmentWhenNoFlagNamesOne) {
  testing::TempDir dir;
  const std::string config = dir.WriteFile("job.json", R"({"job": "env-config", "keep": 9})");
  auto r = Spotguard({"run", "--print-config"}, {{"SPOTGUARD_CONFIG", config}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["keep"], 9);
}

TEST(Cli, JsonLogFormatIsAccepted) {
  testing::TempDir dir;
  // `ls` reads an existing store; it never creates one (docs/stores.md).
  std::filesystem::create_directories(dir.Join("store"));
  auto r = Spotguard(
      {"ls", "--job", "j", "--log-format", "json", "--store", "file://" + dir.Join("store")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto bad = Spotguard({"ls", "--job", "j", "--log-format", "xml"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("log_format: unknown log format \"xml\""), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace sg
