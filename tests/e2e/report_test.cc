// `spotguard report` end to end: the real binary runs a job through two
// interruptions (IMDS simulator notices) and a completion, on a file://
// store, with gaps between the attempts that the test makes and measures.
// The report's attempts, interruptions and causes are checked against what
// the test saw from outside; the causes add up to the span exactly, since
// both come from the same event times. Each agent reads its instance's
// prices from tests/tools/prices_sim.py (EC2's spot price, the Price List's
// on-demand price), which the test changes between attempts: the report's
// cost is each attempt's hours at the prices it measured, unless the
// `prices` key sets one.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "agent/ledger/ledger.h"
#include "common/clock.h"
#include "common/file_store.h"
#include "tests/e2e/agent_e2e_fixture.h"
#include "tests/support/subprocess.h"

namespace sg::testing {
namespace {

class ReportE2E : public AgentE2E {
 protected:
  void SetUp() override {
    AgentE2E::SetUp();
    prices_.emplace("prices_sim.py",
                    std::vector<std::string>{"--access-key", s3_.access_key, "--secret-key",
                                             s3_.secret_key, "--region", "us-east-1",
                                             "--pricing-region", "us-east-1"});
    price_env_ = {{"AWS_ENDPOINT_URL_EC2", prices_->endpoint()},
                  {"AWS_ENDPOINT_URL_PRICING", prices_->endpoint()}};
  }
  // The spot price of the IMDS simulator's instance (g5.xlarge in
  // us-east-1a) from `ago` before now on.
  void SetSpotPrice(double usd, std::chrono::seconds ago) {
    const nlohmann::json body = {
        {"spot",
         {{{"instance_type", "g5.xlarge"},
           {"availability_zone", "us-east-1a"},
           {"price", usd},
           {"timestamp", FormatUtc(SystemClock().Now() - ago, /*millis=*/false)}}}},
        {"on_demand", {{{"instance_type", "g5.xlarge"}, {"region", "us-east-1"}, {"price", 1.006}}}}};
    prices_->Control("POST", "/_sim/prices", body.dump());
  }
  std::string Config(const std::string& name, int64_t steps) {
    return WriteConfig(name, {"--steps", std::to_string(steps)},
                       {{"store", "file://" + dir_.Join("store")}, {"endpoint", nullptr}});
  }
  // The replacement instance is launched at the next whole second (the
  // identity document's pendingTime has no fraction), which is returned.
  Clock::WallTime Launch(const std::string& instance) {
    const auto now = SystemClock().Now();
    const auto launch = std::chrono::ceil<std::chrono::seconds>(now);
    std::this_thread::sleep_until(std::chrono::system_clock::now() + (launch - now));
    nlohmann::json id = {{"instanceId", instance},
                         {"pendingTime", FormatUtc(launch, /*millis=*/false)}};
    imds_.Control("POST", "/_sim/identity", id.dump());
    return launch;
  }
  int64_t NewestStep() {
    auto store = FileStore::Open(dir_.Join("store"));
    EXPECT_TRUE(store.ok());
    auto events = ReadJobEvents(**store, "job");
    EXPECT_TRUE(events.ok());
    int64_t step = 0;
    for (const auto& e : *events) {
      if (e["kind"] == "snapshot" && e["step"].is_number()) step = std::max<int64_t>(step, e["step"]);
    }
    return step;
  }
  int64_t CommittedSnapshots() {
    std::error_code ec;
    int64_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_.Join("store/job/events"), ec)) {
      n += e.path().filename().string().ends_with("-snapshot.json") ? 1 : 0;
    }
    return n;
  }
  // Runs an agent until a snapshot is committed, then sends a notice; returns
  // the wall time at which the agent's exit was seen.
  Clock::WallTime RunInterrupted(const std::string& name, const std::string& config) {
    const int64_t before = CommittedSnapshots();
    auto agent = StartAgent(name, config, "ckpt-" + name, imds_, price_env_);
    EXPECT_TRUE(WaitFor([&] { return CommittedSnapshots() > before; }, 60s)) << agent->Output();
    imds_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 100})");
    const auto code = agent->Wait(60s);
    EXPECT_EQ(code, 75) << agent->Output();
    imds_.Control("DELETE", "/_sim/spot-notice");
    return SystemClock().Now();
  }

  std::optional<ToolServer> prices_;
  std::map<std::string, std::string> price_env_;
};

double Sum(const nlohmann::json& causes) {
  double s = 0;
  for (const auto& [k, v] : causes.items()) s += v.get<double>();
  return s;
}

TEST_F(ReportE2E, TwoInterruptionsAndACompletionAddUpToTheSpanWithTheGapsAsWaiting) {
  const std::string config = Config("job", 1'000'000);
  // Each attempt reads the spot price in effect when it starts.
  SetSpotPrice(0.40, 3h);
  const auto end1 = RunInterrupted("a", config);
  std::this_thread::sleep_for(1500ms);  // the gap before the replacement's launch
  SetSpotPrice(0.50, 2h);
  const auto launch2 = Launch("i-0second0000000000");
  const auto end2 = RunInterrupted("b", config);
  std::this_thread::sleep_for(2500ms);
  SetSpotPrice(0.45, 1h);
  const auto launch3 = Launch("i-0third00000000000");
  // The last attempt trains 40 steps more and finishes.
  const std::string metrics = dir_.Join("spotguard.prom");
  std::map<std::string, std::string> c_env = price_env_;
  c_env["SPOTGUARD_METRICS_FILE"] = metrics;
  auto c = StartAgent("c", Config("job-c", NewestStep() + 40), "ckpt-c", imds_, c_env);
  ASSERT_EQ(c->Wait(60s), 0) << c->Output();

  const CommandResult r =
      RunCommand({SPOTGUARD_BIN, "report", "-c", config, "--json", "--html", dir_.Join("r.html")},
                 {{"SPOTGUARD_CONFIG", ""}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  ASSERT_EQ(report["attempts"].size(), 3u) << r.out;
  EXPECT_EQ(report["interruptions"], 2);
  EXPECT_EQ(report["attempts"][0]["exit_reason"], "notice");
  EXPECT_EQ(report["attempts"][1]["exit_reason"], "notice");
  EXPECT_EQ(report["attempts"][2]["exit_reason"], "complete");
  EXPECT_EQ(report["attempts"][1]["instance"], "i-0second0000000000");
  EXPECT_EQ(report["attempts"][0]["instance_type"], "g5.xlarge");
  EXPECT_EQ(report["attempts"][0]["lifecycle"], "spot");
  // Every millisecond goes to one cause: the sum is the span, whatever the load.
  const double span = report["span_seconds"].get<double>();
  double causes = 0;
  for (const char* cause : {"productive", "lost_work", "restore", "startup", "waiting",
                            "checkpoint_answer", "shutdown"}) {
    causes += report["goodput"][cause].get<double>();
  }
  EXPECT_NEAR(causes, span, 0.005);
  double attempts = 0;
  for (const auto& a : report["attempts"]) attempts += Sum(a["causes"]);
  EXPECT_NEAR(attempts, span, 0.005);
  // The gaps the test made are waiting: from an attempt's exit event (before
  // the test saw the exit) to the next launch (which the test set).
  const double gaps = std::chrono::duration<double>((launch2 - end1) + (launch3 - end2)).count();
  const double waiting = report["goodput"]["waiting"].get<double>();
  EXPECT_GE(waiting, gaps - 0.1) << "each exit event comes before the test sees the exit";
  // Plus the leases and the exit's wait, and whatever time a loaded machine
  // took the test to see each exit: a bound against counting an attempt's
  // training as waiting, not a measure of the test's speed.
  EXPECT_LE(waiting, gaps + 30.0) << "plus at most the leases, the exit's wait and the test's lag";
  // Both replacements restored; the checkpoint request was answered, so the
  // work before each notice was kept.
  EXPECT_GT(report["attempts"][1]["causes"]["restore"].get<double>(), 0);
  EXPECT_GT(report["attempts"][2]["causes"]["restore"].get<double>(), 0);
  EXPECT_GT(report["goodput"]["productive"].get<double>(), 0);
  EXPECT_LT(report["goodput"]["lost_work"].get<double>(), 2.0);
  EXPECT_EQ(report["checkpoint_cost"]["samples"], 2);
  // The last attempt's metrics file, as it was left at the exit.
  auto prom = ReadFileToString(metrics);
  ASSERT_TRUE(prom.ok());
  EXPECT_NE(prom->find("spotguard_phase{job=\"job\",phase=\"done\"} 1"), std::string::npos)
      << *prom;
  if (RunCommand({"/bin/sh", "-c", "command -v promtool"}).exit_code == 0) {
    const CommandResult check = RunCommand({"/bin/sh", "-c", "promtool check metrics < " + metrics});
    EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  }
  auto page = ReadFileToString(dir_.Join("r.html"));
  ASSERT_TRUE(page.ok());
  EXPECT_NE(page->find("class=\"lane\""), std::string::npos);
  EXPECT_NE(page->find("prices measured"), std::string::npos);

  // The cost: each attempt's hours at the spot price it measured, the same
  // hours at the on-demand price, and the saving.
  const double spot[] = {0.40, 0.50, 0.45};
  double usd = 0, hours = 0;
  for (size_t i = 0; i < 3; ++i) {
    const auto& a = report["attempts"][i];
    EXPECT_EQ(a["price_source"], "measured") << a.dump();
    EXPECT_EQ(a["on_demand_price_source"], "measured") << a.dump();
    EXPECT_DOUBLE_EQ(a["price_usd_per_hour"].get<double>(), spot[i]) << a.dump();
    EXPECT_DOUBLE_EQ(a["on_demand_usd_per_hour"].get<double>(), 1.006) << a.dump();
    usd += a["seconds"].get<double>() / 3600 * spot[i];
    hours += a["seconds"].get<double>() / 3600;
  }
  const auto& cost = report["cost"];
  ASSERT_FALSE(cost.is_null()) << r.out;
  EXPECT_EQ(cost["prices"], "measured");
  EXPECT_TRUE(cost["complete"].get<bool>());
  EXPECT_NEAR(cost["instance_hours"].get<double>(), hours, 1e-9);
  EXPECT_NEAR(cost["usd"].get<double>(), usd, 1e-9);
  EXPECT_NEAR(cost["on_demand_usd"].get<double>(), hours * 1.006, 1e-9);
  EXPECT_NEAR(cost["saving_usd"].get<double>(), hours * 1.006 - usd, 1e-9);
  // Every agent read each price once, signed for its service.
  const auto calls = nlohmann::json::parse(prices_->Control("GET", "/_sim/calls"));
  int ec2 = 0, pricing = 0;
  for (const auto& call : calls) {
    EXPECT_EQ(call["status"], 200) << call.dump();
    ec2 += call["service"] == "ec2";
    pricing += call["service"] == "pricing";
  }
  EXPECT_EQ(ec2, 3);
  EXPECT_EQ(pricing, 3);

  // The `prices` key wins over a measured price, each price on its own.
  const CommandResult set = RunCommand(
      {SPOTGUARD_BIN, "report", "-c", config, "--json"},
      {{"SPOTGUARD_CONFIG", ""}, {"SPOTGUARD_PRICES", "g5.xlarge=0.25/"}});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  const nlohmann::json overridden = nlohmann::json::parse(set.out);
  EXPECT_EQ(overridden["cost"]["prices"], "measured and configured");
  EXPECT_EQ(overridden["attempts"][0]["price_source"], "configured");
  EXPECT_EQ(overridden["attempts"][0]["on_demand_price_source"], "measured");
  EXPECT_NEAR(overridden["cost"]["usd"].get<double>(), hours * 0.25, 1e-9);
  EXPECT_NEAR(overridden["cost"]["on_demand_usd"].get<double>(), hours * 1.006, 1e-9);
  const CommandResult text = RunCommand({SPOTGUARD_BIN, "report", "-c", config},
                                        {{"SPOTGUARD_CONFIG", ""}});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("; prices measured\n"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace sg::testing
