// `spotguard watch` run as user-data scripts and people run it, against the
// IMDS simulator.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "common/aws_credentials.h"
#include "common/clock.h"
#include "common/strings.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using testing::CommandResult;

// The environment every run starts from: no config or endpoint from the
// machine running the tests.
std::map<std::string, std::string> CleanEnv(std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> env = {{"SPOTGUARD_CONFIG", ""},
                                            {"SPOTGUARD_IMDS_ENDPOINT", ""},
                                            {"SPOTGUARD_IMDS_POLL_INTERVAL", ""},
                                            {"AWS_EC2_METADATA_SERVICE_ENDPOINT", ""},
                                            {"AWS_EC2_METADATA_DISABLED", ""}};
  for (auto& [k, v] : extra) env[k] = v;
  return env;
}

CommandResult Watch(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), {SPOTGUARD_BIN, "watch"});
  return testing::RunCommand(args, CleanEnv(std::move(env)), std::chrono::seconds(60));
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& l : Split(text, '\n')) {
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

// "2026-11-22T08:20:02.123Z" with its milliseconds.
Clock::WallTime ParseUtcMillis(const std::string& text) {
  auto whole = ParseIso8601(text);
  EXPECT_TRUE(whole.ok()) << text;
  const size_t dot = text.find('.');
  const int ms = dot == std::string::npos ? 0 : std::stoi(text.substr(dot + 1, 3));
  return whole.ok() ? *whole + milliseconds(ms) : Clock::WallTime{};
}

// Waits until the simulator has been asked for the spot notice `n` times:
// the watcher is polling.
// How many times the notice was read so far.
int NoticePolls(testing::ImdsSimulator& sim) {
  int polls = 0;
  for (const auto& r : json::parse(sim.Control("GET", "/_sim/requests"))) {
    polls += r["path"] == "/latest/meta-data/spot/instance-action";
  }
  return polls;
}

void WaitForPolls(testing::ImdsSimulator& sim, int n) {
  for (int i = 0; i < 1500; ++i) {
    if (NoticePolls(sim) >= n) return;
    std::this_thread::sleep_for(milliseconds(20));
  }
  ADD_FAILURE() << "the watcher never polled";
}

TEST(Watch, OnceJsonPrintsOneNoticeLineWithinOnePollIntervalAndExitsZero) {
  testing::ImdsSimulator sim;
  CommandResult result;
  std::thread watcher([&] {
    result = Watch({"--once", "--json", "--imds-endpoint", sim.endpoint()});
  });
  WaitForPolls(sim, 1);
  const Clock::WallTime triggered = SystemClock().Now();
  const json set =
      json::parse(sim.Control("POST", "/_sim/spot-notice", R"({"action": "terminate"})"));
  const int polls_at_trigger = NoticePolls(sim);
  watcher.join();

  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto lines = Lines(result.out);
  ASSERT_EQ(lines.size(), 1u) << result.out;
  const json event = json::parse(lines[0]);
  EXPECT_EQ(event["kind"], "notice");
  EXPECT_EQ(event["action"], "terminate");
  EXPECT_EQ(event["time"], set["time"]);
  EXPECT_EQ(event["notice"], true);
  EXPECT_EQ(event["instance_id"], "i-0123456789abcdef0");
  // Seen by the first poll after the trigger, whatever the machine's load:
  // every read counted once the notice was set saw it, so at most one more
  // read came before the watcher ended. The latency is shown, not judged.
  EXPECT_LE(NoticePolls(sim) - polls_at_trigger, 1);
  const auto latency = ParseUtcMillis(event["observed"]) - triggered;
  std::printf("[ latency  ] watch --once --json: notice observed %lld ms after the trigger\n",
              static_cast<long long>(std::chrono::duration_cast<milliseconds>(latency).count()));
  EXPECT_NE(result.err.find("watching i-0123456789abcdef0 (g5.xlarge, spot, us-east-1a)"),
            std::string::npos)
      << result.err;
}

TEST(Watch, WithoutAMetadataServiceItSaysSoAndExitsOne) {
  const auto start = std::chrono::steady_clock::now();
  auto r = Watch({"--imds-endpoint", "http://127.0.0.1:9"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no instance metadata service answers at http://127.0.0.1:9"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("not an EC2 instance"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
}

TEST(Watch, AwsEc2MetadataDisabledIsHonoured) {
  testing::ImdsSimulator sim;
  auto r = Watch({"--imds-endpoint", sim.endpoint()}, {{"AWS_EC2_METADATA_DISABLED", "true"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("AWS_EC2_METADATA_DISABLED=true"), std::string::npos) << r.err;
  EXPECT_TRUE(json::parse(sim.Control("GET", "/_sim/requests")).empty()) << "nothing was sent";
}

TEST(Watch, TheAwsEndpointVariableIsUsedWhenTheConfigKeepsTheDefault) {
  testing::ImdsSimulator sim;
  sim.Control("POST", "/_sim/spot-notice", R"({"action": "stop"})");
  auto r = Watch({"--once"}, {{"AWS_EC2_METADATA_SERVICE_ENDPOINT", sim.endpoint() + "/"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("spot interruption notice: stop at "), std::string::npos) << r.out;
}

TEST(Watch, ExecRunsTheHookWithTheEventOnStdinAndInTheEnvironment) {
  testing::ImdsSimulator sim;
  testing::TempDir dir;
  sim.Control("POST", "/_sim/rebalance", "{}");
  sim.Control("POST", "/_sim/spot-notice", R"({"action": "hibernate", "in_seconds": 0})");
  const std::string hook = "cat > '" + dir.Join("") +
                           "'$$.stdin; printf %s \"$SPOTGUARD_EVENT\" > '" + dir.Join("") +
                           "'$$.env; echo hook-stdout; exit 3";
  auto r = Watch({"--once", "--json", "--exec", hook, "--imds-endpoint", sim.endpoint()});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << "stdout holds only events: " << r.out;
  std::set<std::string> printed(lines.begin(), lines.end());
  std::set<std::string> kinds;
  int hooks = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    if (entry.path().extension() != ".stdin") continue;
    ++hooks;
    std::ifstream in(entry.path());
    const std::string stdin_text((std::istreambuf_iterator<char>(in)), {});
    std::ifstream env_in(std::filesystem::path(entry.path()).replace_extension(".env"));
    const std::string env_text((std::istreambuf_iterator<char>(env_in)), {});
    EXPECT_EQ(stdin_text, env_text + "\n");
    EXPECT_TRUE(printed.count(env_text)) << "the hook got the printed line: " << env_text;
    kinds.insert(json::parse(env_text)["kind"]);
  }
  EXPECT_EQ(hooks, 2);
  EXPECT_EQ(kinds, (std::set<std::string>{"notice", "rebalance"}));
  EXPECT_NE(r.err.find("hook-stdout"), std::string::npos) << "hook stdout goes to stderr";
  EXPECT_NE(r.err.find("--exec for the notice event failed: exit code 3"), std::string::npos)
      << r.err;
}

TEST(Watch, TextOutputAndAStopSignalEndTheWatchCleanly) {
  testing::ImdsSimulator sim;
  sim.Control("POST", "/_sim/rebalance", "{}");
  // Not a notice, so only the signal (sent by the hook to its parent) ends the watch.
  auto r = Watch({"--exec", "kill -TERM $PPID", "--imds-endpoint", sim.endpoint()},
                 {{"SPOTGUARD_IMDS_POLL_INTERVAL", "200ms"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_NE(lines[0].find("Z rebalance recommendation: elevated risk of interruption"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(r.err.find("stopping on a signal"), std::string::npos) << r.err;
}

TEST(Watch, OnceTreatsLifecycleTerminatedAsANotice) {
  testing::ImdsSimulator sim;
  sim.Control("POST", "/_sim/lifecycle", R"({"state": "Terminated"})");
  auto r = Watch({"--once", "--imds-endpoint", sim.endpoint()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Auto Scaling target lifecycle state: Terminated (the instance is being "
                       "terminated)"),
            std::string::npos)
      << r.out;
}

TEST(Watch, IMDSErrorsWhileWatchingAreReportedNotSilent) {
  testing::ImdsSimulator sim;
  CommandResult result;
  std::thread watcher([&] {
    result = Watch({"--once", "--json", "--imds-endpoint", sim.endpoint()},
                   {{"SPOTGUARD_IMDS_POLL_INTERVAL", "100ms"}});
  });
  WaitForPolls(sim, 1);
  sim.Control("POST", "/_sim/fault",
              R"({"path": "/latest/meta-data/spot/instance-action", "status": 500, "count": 5})");
  WaitForPolls(sim, 8);
  sim.Control("POST", "/_sim/spot-notice", R"({"action": "terminate"})");
  watcher.join();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(Lines(result.out).size(), 1u) << result.out;
  EXPECT_NE(result.err.find("meta-data/spot/instance-action: IMDS GET "
                            "meta-data/spot/instance-action answered HTTP 500"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("readable again after 5 failed polls"), std::string::npos)
      << result.err;
}

}  // namespace
}  // namespace sg
