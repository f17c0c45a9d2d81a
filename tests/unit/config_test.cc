#include "agent/config/config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>

#include "agent/config/config_keys.h"
#include "agent/config/placeholders.h"
#include "agent/cli/snapshot_commands.h"
#include "agent/trainer/supervisor.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

using testing::TempDir;

class ConfigTest : public ::testing::Test {
 protected:
  ConfigResult Load(const std::string& file_text, std::map<std::string, std::string> env = {},
                    std::map<std::string, std::string> flags = {}, ConfigNeeds needs = {}) {
    ConfigSources s;
    if (!file_text.empty()) s.file = dir_.WriteFile("job.json", file_text);
    s.env = std::move(env);
    s.flags = std::move(flags);
    return LoadConfig(s, needs);
  }
  static std::string AllProblems(const ConfigResult& r) {
    std::string out;
    for (const auto& p : r.problems) out += p.message + "\n";
    return out;
  }
  static bool Mentions(const ConfigResult& r, const std::string& key, const std::string& text) {
    for (const auto& p : r.problems) {
      if (p.key == key && p.message.find(text) != std::string::npos) return true;
    }
    return false;
  }
  TempDir dir_;
};

TEST_F(ConfigTest, DefaultsAreTheDocumentedOnes) {
  auto r = Load("");
  ASSERT_TRUE(r.ok()) << AllProblems(r);
  const Config& c = r.config;
  EXPECT_EQ(c.store, "file:///var/lib/spotguard/store");
  EXPECT_EQ(c.keep, 3);
  EXPECT_EQ(c.upload_interval, std::chrono::minutes(5));
  EXPECT_EQ(c.stop_grace, std::chrono::seconds(60));
  EXPECT_EQ(c.stop_signal, SIGTERM);
  EXPECT_FALSE(c.checkpoint_signal.has_value());
  EXPECT_EQ(c.imds.endpoint, "http://169.254.169.254");
  EXPECT_EQ(c.imds.poll_interval, std::chrono::seconds(2));
  EXPECT_EQ(c.compression.level, 1);
  EXPECT_EQ(c.restart.max, 5);
  EXPECT_EQ(c.lease.timeout, std::chrono::seconds(150));
  EXPECT_EQ(c.patterns, std::vector<std::string>{"*"});
}

TEST_F(ConfigTest, ReadsTheDesignExampleWithComments) {
  auto r = Load(R"({
    "job": "resnet50-lr3e-4",
    "store": "s3://my-bucket/spotguard",        // or file:///var/lib/spotguard/store
    "region": "us-east-1",
    "endpoint": null,
    "checkpoint_dir": "/data/ckpt",
    "preset": "pytorch",
    "patterns": ["*.pt"],
    "command": ["python3", "train.py", "--out", "/data/ckpt"],
    "resume_args": ["--resume", "{resume}"],
    /* block comments too */
    "checkpoint_signal": "SIGUSR1",
    "stop_signal": "SIGTERM", "stop_grace": "60s",
    "upload_interval": "5m",
    "checkpoint_interval": null,
    "keep": 3,
    "compression": {"level": 3, "threads": 0, "shuffle": "auto"},
    "imds": {"endpoint": "http://169.254.169.254", "poll_interval": "2s"},
    "on_rebalance": "snapshot",
    "on_complete": "mark",
    "lifecycle_hook": null,
    "restart": {"max": 5, "backoff": "10s", "max_backoff": "5m"},
    "lease": {"heartbeat": "30s", "timeout": "150s"}
  })");
  ASSERT_TRUE(r.ok()) << AllProblems(r);
  EXPECT_EQ(r.config.job, "resnet50-lr3e-4");
  EXPECT_EQ(r.config.store, "s3://my-bucket/spotguard");
  EXPECT_EQ(r.config.region, "us-east-1");
  EXPECT_EQ(r.config.preset, Preset::kPytorch);
  EXPECT_EQ(r.config.checkpoint_signal, SIGUSR1);
  EXPECT_EQ(r.config.resume_args, (std::vector<std::string>{"--resume", "{resume}"}));
}

TEST_F(ConfigTest, ReportsEveryProblemAtOnceNamingEachKey) {
  auto r = Load(R"({"kep": 3, "upload_interval": "soon", "preset": "pytorh", "keep": 0,
                    "stop_signal": "SIGFOO", "store": "gs://b/x",
                    "compression": {"levle": 3}})");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Mentions(r, "kep", "did you mean \"keep\"")) << AllProblems(r);
  EXPECT_TRUE(Mentions(r, "compression.levle", "did you mean \"compression.level\""));
  EXPECT_TRUE(Mentions(r, "upload_interval", "not a duration"));
  EXPECT_TRUE(Mentions(r, "preset", "did you mean \"pytorch\""));
  EXPECT_TRUE(Mentions(r, "keep", "at least 1"));
  EXPECT_TRUE(Mentions(r, "stop_signal", "unknown signal"));
  EXPECT_TRUE(Mentions(r, "store", "unsupported scheme \"gs\""));
  EXPECT_EQ(r.problems.size(), 7u) << AllProblems(r);
}

TEST_F(ConfigTest, ProblemsSayWhereTheValueCameFrom) {
  auto r = Load(R"({"keep": 0})", {{"SPOTGUARD_UPLOAD_INTERVAL", "5 min"}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Mentions(r, "keep", "job.json")) << AllProblems(r);
  EXPECT_TRUE(Mentions(r, "upload_interval", "SPOTGUARD_UPLOAD_INTERVAL"));
}

TEST_F(ConfigTest, FlagBeatsEnvironmentBeatsFileBeatsDefault) {
  const std::string file = R"({"job": "from-file", "store": "file:///from/file", "keep": 4,
                               "region": "eu-west-1"})";
  auto r = Load(file, {{"SPOTGUARD_JOB", "from-env"}, {"SPOTGUARD_STORE", "file:///from/env"}},
                {{"job", "from-flag"}});
  ASSERT_TRUE(r.ok()) << AllProblems(r);
  EXPECT_EQ(r.config.job, "from-flag");
  EXPECT_EQ(r.config.store, "file:///from/env");
  EXPECT_EQ(r.config.keep, 4);
  EXPECT_EQ(r.config.region, "eu-west-1");
  EXPECT_EQ(r.config.upload_interval, std::chrono::minutes(5));
}

TEST_F(ConfigTest, NestedKeysHaveEnvironmentVariablesToo) {
  auto r = Load("", {{"SPOTGUARD_COMPRESSION_LEVEL", "9"},
                     {"SPOTGUARD_IMDS_ENDPOINT", "http://127.0.0.1:1338"},
                     {"SPOTGUARD_LEASE_TIMEOUT", "5m"},
                     {"SPOTGUARD_PATTERNS", "*.pt, *.bin"},
                     {"SPOTGUARD_COMMAND", R"(["python3", "train.py"])"}});
  ASSERT_TRUE(r.ok()) << AllProblems(r);
  EXPECT_EQ(r.config.compression.level, 9);
  EXPECT_EQ(r.config.imds.endpoint, "http://127.0.0.1:1338");
  EXPECT_EQ(r.config.lease.timeout, std::chrono::minutes(5));
  EXPECT_EQ(r.config.patterns, (std::vector<std::string>{"*.pt", "*.bin"}));
  EXPECT_EQ(r.config.command, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_EQ(EnvVarForKey("compression.level"), "SPOTGUARD_COMPRESSION_LEVEL");
}

// Frame reuse (docs/design.md §4): on unless the file or SPOTGUARD_REUSE
// says off; any other value is named.
TEST_F(ConfigTest, ReuseIsOnByDefaultAndCanBeTurnedOff) {
  auto r = Load("");
  ASSERT_TRUE(r.ok()) << AllProblems(r);
  EXPECT_TRUE(r.config.reuse);
  EXPECT_TRUE(SnapshotOptionsOf(r.config).reuse);
  r = Load(R"({"reuse": "off"})");
  ASSERT_TRUE(r.ok()) << AllProblems(r);
  EXPECT_FALSE(r.config.reuse);
  EXPECT_FALSE(SnapshotOptionsOf(r.config).reuse);
  r = Load(R"({"reuse": "off"})", {{"SPOTGUARD_REUSE", "on"}});
  ASSERT_TRUE(r.ok()) << AllProblems(r);
  EXPECT_TRUE(r.config.reuse);
  r = Load("", {{"SPOTGUARD_REUSE", "no"}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Mentions(r, "reuse", "unknown value \"no\" (choose one of on, off)"))
      << AllProblems(r);
  r = Load(R"({"reuse": false})");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Mentions(r, "reuse", "")) << AllProblems(r);
}

TEST_F(ConfigTest, UnrelatedSpotguardVariablesAreIgnored) {
  // The trainer's own variables must not break a nested spotguard.
  auto r = Load("", {{"SPOTGUARD_ATTEMPT", "2"},
                     {"SPOTGUARD_RESUME_FROM", "/x"},
                     {"SPOTGUARD_TEST_S3_BUCKET", "b"}});
  EXPECT_TRUE(r.ok()) << AllProblems(r);
}

TEST_F(ConfigTest, BadEnvironmentValuesAreNamed) {
  auto r = Load("", {{"SPOTGUARD_KEEP", "three"}, {"SPOTGUARD_COMMAND", "python3 train.py"}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Mentions(r, "keep", "must be an integer, got \"three\"")) << AllProblems(r);
  EXPECT_TRUE(Mentions(r, "command", "JSON array"));
}

TEST_F(ConfigTest, WrongTypesAreNamedWithTheValue) {
  auto r = Load(R"({"keep": "3", "upload_interval": 300, "command": "python3 train.py",
                    "compression": 5, "patterns": ["*.pt", 1]})");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Mentions(r, "keep", "must be an integer, got \"3\"")) << AllProblems(r);
  EXPECT_TRUE(Mentions(r, "upload_interval", "duration string"));
  EXPECT_TRUE(Mentions(r, "command", "list of strings"));
  EXPECT_TRUE(Mentions(r, "compression", "must be an object"));
  EXPECT_TRUE(Mentions(r, "patterns", "list of strings"));
}

TEST_F(ConfigTest, InvalidJsonIsReportedWithItsPosition) {
  auto r = Load("{\n  \"job\": \"x\",\n  \"keep\": 3,,\n}");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Mentions(r, "config", "line 3")) << AllProblems(r);
}

TEST_F(ConfigTest, AMissingFileIsAProblemNotACrash) {
  ConfigSources s;
  s.file = dir_.Join("nope.json");
  auto r = LoadConfig(s, {});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Mentions(r, "config", "cannot read")) << AllProblems(r);
}

TEST_F(ConfigTest, SubcommandNeedsAreEnforced) {
  auto r = Load("", {}, {}, ConfigNeeds{.job = true, .checkpoint_dir = true, .command = true});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Mentions(r, "job", "required")) << AllProblems(r);
  EXPECT_TRUE(Mentions(r, "checkpoint_dir", "required"));
  EXPECT_TRUE(Mentions(r, "command", "required"));
}

TEST_F(ConfigTest, CommandAfterDoubleDashReplacesTheConfiguredOne) {
  ConfigSources s;
  s.file = dir_.WriteFile("j.json", R"({"command": ["old"]})");
  s.command_args = {"python3", "new.py"};
  auto r = LoadConfig(s, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.config.command, (std::vector<std::string>{"python3", "new.py"}));
}

TEST_F(ConfigTest, ValueRulesAreChecked) {
  auto r = Load(R"({"job": "has space", "compression": {"level": 30, "shuffle": 3},
                    "lease": {"heartbeat": "60s", "timeout": "90s"},
                    "group": {"heartbeat": "10s", "timeout": "15s"},
                    "restart": {"backoff": "10m", "max_backoff": "1m"},
                    "imds": {"endpoint": "169.254.169.254"}, "checkpoint_signal": "SIGKILL",
                    "upload_interval": "0s", "command": ["train", "{resum}"]})");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Mentions(r, "job", "letters, digits")) << AllProblems(r);
  EXPECT_TRUE(Mentions(r, "compression.level", "at most 19"));
  EXPECT_TRUE(Mentions(r, "compression.shuffle", "got 3"));
  EXPECT_TRUE(Mentions(r, "lease.timeout", "twice lease.heartbeat (1m), so one late renewal"));
  EXPECT_TRUE(Mentions(r, "group.timeout", "twice group.heartbeat (10s), so one late heartbeat"));
  EXPECT_TRUE(Mentions(r, "restart.max_backoff", "at least restart.backoff"));
  EXPECT_TRUE(Mentions(r, "imds.endpoint", "http://"));
  EXPECT_TRUE(Mentions(r, "checkpoint_signal", "SIGKILL"));
  EXPECT_TRUE(Mentions(r, "upload_interval", "longer than 0"));
  EXPECT_TRUE(Mentions(r, "command[1]", "unknown placeholder {resum}"));
}

// "99999999999h" once overflowed to about zero when turned into nanoseconds.
TEST_F(ConfigTest, DurationsAreBoundedNamingTheKeyAndTheMaximum) {
  auto r = Load(R"({"settle_time": "99999999999h", "lease": {"timeout": "31d"}})",
                {{"SPOTGUARD_UPLOAD_INTERVAL", "100000d"}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Mentions(r, "settle_time", "\"99999999999h\" is too long: at most 720h (30 days)"))
      << AllProblems(r);
  EXPECT_TRUE(Mentions(r, "lease.timeout", "at most 720h")) << AllProblems(r);
  EXPECT_TRUE(Mentions(r, "upload_interval", "at most 720h")) << AllProblems(r);
  auto ok = Load(R"({"settle_time": "30d", "checkpoint_interval": "720h"})");
  EXPECT_TRUE(ok.ok()) << AllProblems(ok);
  EXPECT_EQ(ok.config.settle_time, std::chrono::hours(720));
}

TEST(Placeholders, DoubledBracesAreLiteralBraces) {
  auto value = [](std::string_view name) -> std::optional<std::string> {
    if (name == "job") return "J";
    return std::nullopt;
  };
  EXPECT_EQ(ExpandPlaceholders("filename={{epoch}}-{{step}}", value), "filename={epoch}-{step}");
  EXPECT_EQ(ExpandPlaceholders("{job}/{{job}}/{{{job}}}", value), "J/{job}/{J}");
  EXPECT_EQ(ExpandPlaceholders("{other} { } {} {JOB} {", value), "{other} { } {} {JOB} {");
  EXPECT_EQ(ExpandPlaceholders("a}}b{{c", value), "a}b{c");
}

TEST_F(ConfigTest, EscapedBracesPassTheCheckAndReachTheTrainerAsOneBrace) {
  auto r = Load(R"({"job": "j", "checkpoint_dir": "/ckpt",
                    "command": ["python3", "train.py", "--ckpt.filename={{epoch}}-{{step}}"],
                    "resume_args": ["--resume", "{resume}", "--tag={{resume}}"]})");
  ASSERT_TRUE(r.ok()) << AllProblems(r);
  TrainerLaunch launch;
  launch.resume = "/ckpt/step_5.pt";
  launch.attempt = 2;
  EXPECT_EQ(TrainerArgv(r.config, launch),
            (std::vector<std::string>{"python3", "train.py", "--ckpt.filename={epoch}-{step}",
                                      "--resume", "/ckpt/step_5.pt", "--tag={resume}"}));
  auto bad = Load(R"({"command": ["train", "{epoch}-{{step}}"]})");
  EXPECT_TRUE(Mentions(bad, "command[1]", "unknown placeholder {epoch}")) << AllProblems(bad);
  EXPECT_TRUE(Mentions(bad, "command[1]", "write {{ and }} for literal braces"));
}

TEST_F(ConfigTest, CaffeAsksForCheckpointsWithSighupByDefault) {
  auto r = Load(R"({"preset": "caffe"})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.config.checkpoint_signal, SIGHUP);
  EXPECT_EQ(r.config.patterns.front(), "*.caffemodel");
  auto none = Load(R"({"preset": "caffe", "checkpoint_signal": "none"})");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.config.checkpoint_signal.has_value());
}

TEST_F(ConfigTest, RelativeCheckpointDirBecomesAbsolute) {
  auto r = Load(R"({"checkpoint_dir": "ckpt/"})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.config.checkpoint_dir.front(), '/');
  EXPECT_TRUE(r.config.checkpoint_dir.ends_with("/ckpt")) << r.config.checkpoint_dir;
}

TEST_F(ConfigTest, PrintedConfigReadsBackToTheSameConfig) {
  auto r = Load(R"({"job": "j", "checkpoint_interval": "90s", "compression": {"shuffle": 4},
                    "on_complete": "scale-to-zero", "checkpoint_signal": "usr1"})");
  ASSERT_TRUE(r.ok()) << AllProblems(r);
  const std::string printed = ConfigToJson(r.config, /*redact=*/false).dump();
  auto again = Load(printed);
  ASSERT_TRUE(again.ok()) << AllProblems(again);
  EXPECT_EQ(ConfigToJson(again.config, false), ConfigToJson(r.config, false));
}

TEST_F(ConfigTest, RedactionHidesCredentialsButKeepsTheRest) {
  auto r = Load(R"({"endpoint": "https://admin:hunter2@minio.internal:9000",
                    "command": ["python3", "train.py", "--wandb-api-key=abc123", "--password",
                                "s3cret", "--lr", "0.1"]})");
  ASSERT_TRUE(r.ok()) << AllProblems(r);
  const std::string printed = ConfigToJson(r.config, /*redact=*/true).dump();
  EXPECT_EQ(printed.find("hunter2"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("abc123"), std::string::npos);
  EXPECT_EQ(printed.find("s3cret"), std::string::npos);
  EXPECT_NE(printed.find("minio.internal:9000"), std::string::npos);
  EXPECT_NE(printed.find("\"0.1\""), std::string::npos);
  EXPECT_NE(ConfigToJson(r.config, /*redact=*/false).dump().find("hunter2"), std::string::npos);
}

}  // namespace
}  // namespace sg

namespace sg {
namespace {

// The ledger's keys (docs/operations.md): the metrics file and the prices.
TEST_F(ConfigTest, MetricsFileAndPricesAreKeysCheckedWhenRead) {
  auto r = Load("");
  ASSERT_TRUE(r.ok()) << AllProblems(r);
  EXPECT_TRUE(r.config.metrics_file.empty());
  EXPECT_TRUE(r.config.prices.empty());
  r = Load(R"({"metrics_file": "/var/lib/node_exporter/spotguard.prom",
               "prices": ["g5.xlarge=0.45/1.006"]})",
           {{"SPOTGUARD_PRICES", "g5.xlarge=0.4/1.006, m5.large=/0.096"}});
  ASSERT_TRUE(r.ok()) << AllProblems(r);
  EXPECT_EQ(r.config.metrics_file, "/var/lib/node_exporter/spotguard.prom");
  EXPECT_EQ(r.config.prices,
            (std::vector<std::string>{"g5.xlarge=0.4/1.006", "m5.large=/0.096"}));
  r = Load(R"({"prices": ["g5.xlarge=cheap/1"], "metrics_file": ""})");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Mentions(r, "prices", "g5.xlarge=cheap/1")) << AllProblems(r);
  EXPECT_TRUE(Mentions(r, "metrics_file", "must not be empty")) << AllProblems(r);
}

// The config table (agent/config/config_keys.h): each key set to its row's sample
// changes what --print-config shows for it, so a row cannot be left unread
// or unprinted. checkpoint_cadence.mode "auto" needs checkpoint_signal, so
// the base sets one (and checkpoint_signal's sample is another).
TEST_F(ConfigTest, EveryKeyOfTheTableIsReadAndPrinted) {
  using ojson = nlohmann::ordered_json;
  const std::string base = R"({"checkpoint_signal": "SIGUSR1"})";
  auto plain = Load(base);
  ASSERT_TRUE(plain.ok()) << AllProblems(plain);
  const ojson before = ConfigToJson(plain.config, /*redact=*/false);
  for (const config_detail::KeyRow& row : config_detail::Rows()) {
    std::string pointer = "/" + std::string(row.key);
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    const ojson::json_pointer path(pointer);
    ojson file = ojson::parse(base);
    file[path] = ojson::parse(row.sample);
    EXPECT_NE(file[path], ojson::parse(row.default_json)) << row.key << ": sample is the default";
    auto r = Load(file.dump());
    ASSERT_TRUE(r.ok()) << row.key << ": " << AllProblems(r);
    const ojson after = ConfigToJson(r.config, /*redact=*/false);
    ASSERT_TRUE(after.contains(path) && before.contains(path)) << row.key << " is not printed";
    EXPECT_NE(after.at(path), before.at(path)) << row.key << ": " << row.sample << " not read";
  }
}

// --print-config writes the table's keys and no other, in the table's order.
TEST_F(ConfigTest, PrintedKeysAreTheTableKeysInOrder) {
  auto r = Load(R"({"complete_when": {"step_at_least": 10}})");
  ASSERT_TRUE(r.ok()) << AllProblems(r);
  const std::vector<std::string> keys = ConfigKeys();
  const nlohmann::ordered_json j = ConfigToJson(r.config, /*redact=*/true);
  std::vector<std::string> printed;
  for (const auto& [key, value] : j.items()) {
    if (std::find(keys.begin(), keys.end(), key) != keys.end() || !value.is_object()) {
      printed.push_back(key);
      continue;
    }
    for (const auto& item : value.items()) printed.push_back(key + "." + item.key());
  }
  EXPECT_EQ(printed, keys);
}

}  // namespace
}  // namespace sg
