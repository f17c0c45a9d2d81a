// The instance's prices (agent/run/instance_prices.h) from the agent's start
// to the report: read once per attempt through the price readers, recorded
// as the "prices" event whether or not they could be read, and used by
// `report` per attempt unless the `prices` key sets them (agent/cli/report_cost.h).
#include "agent/run/instance_prices.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "agent/cli/report.h"
#include "agent/cli/report_html.h"
#include "agent/config/config.h"
#include "agent/config/exit_codes.h"
#include "agent/ledger/ledger.h"
#include "agent/run/daemon.h"
#include "common/file_store.h"
#include "common/sd_notify.h"
#include "tests/support/agent_fakes.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

using std::chrono::seconds;

const InstanceIdentity kG5{"i-0price", "eu-west-3", "eu-west-3a", "g5.xlarge", "spot"};

// Readers that answer with fixed values and count their calls.
struct CountingReaders {
  int spot_calls = 0, on_demand_calls = 0;
  std::string spot_args, on_demand_args;
  Status spot_fails = Status::Ok();
  PriceReaders Readers() {
    PriceReaders r;
    r.spot = [this](const std::string& type, const std::string& zone) -> StatusOr<SpotPrice> {
      ++spot_calls;
      spot_args = type + " " + zone;
      if (!spot_fails.ok()) return spot_fails;
      return SpotPrice{type, zone, "Linux/UNIX", 0.4523, "2026-11-01T00:00:00.000Z"};
    };
    r.on_demand = [this](const std::string& type,
                         const std::string& region) -> StatusOr<OnDemandPrice> {
      ++on_demand_calls;
      on_demand_args = type + " " + region;
      return OnDemandPrice{type, region, 1.006, "SKU1", 1};
    };
    return r;
  }
};

TEST(InstancePrices, BothPricesAreReadForTheInstancesTypeZoneAndRegion) {
  CountingReaders fake;
  const nlohmann::ordered_json d = ReadInstancePrices(fake.Readers(), kG5);
  EXPECT_EQ(fake.spot_args, "g5.xlarge eu-west-3a");
  EXPECT_EQ(fake.on_demand_args, "g5.xlarge eu-west-3");
  EXPECT_DOUBLE_EQ(d["spot"]["usd_per_hour"].get<double>(), 0.4523);
  EXPECT_EQ(d["spot"]["source"], "ec2");
  EXPECT_DOUBLE_EQ(d["on_demand"]["usd_per_hour"].get<double>(), 1.006);
  EXPECT_EQ(d["on_demand"]["source"], "pricing");
  EXPECT_EQ(PriceReadWarning(d), "");
}

TEST(InstancePrices, APriceThatCannotBeReadIsAnErrorInTheEventAndAWarning) {
  CountingReaders fake;
  fake.spot_fails = Status::PermissionDenied("EC2 DescribeSpotPriceHistory: UnauthorizedOperation");
  const nlohmann::ordered_json d = ReadInstancePrices(fake.Readers(), kG5);
  EXPECT_FALSE(d["spot"].contains("usd_per_hour"));
  EXPECT_NE(d["spot"]["error"].get<std::string>().find("UnauthorizedOperation"), std::string::npos);
  EXPECT_TRUE(d["on_demand"].contains("usd_per_hour"));
  const std::string warning = PriceReadWarning(d);
  EXPECT_NE(warning.find("spot: EC2 DescribeSpotPriceHistory: UnauthorizedOperation"),
            std::string::npos)
      << warning;
  EXPECT_EQ(warning.find("on-demand:"), std::string::npos) << warning;
}

TEST(InstancePrices, AnUnknownInstanceIsNotPriced) {
  CountingReaders fake;
  InstancePriceRead read(/*run_inline=*/true);
  read.Start(fake.Readers(), InstanceIdentity{"i-1", "", "", "", ""}, Clock::WallTime{});
  EXPECT_FALSE(read.Take().has_value());
  EXPECT_EQ(fake.spot_calls + fake.on_demand_calls, 0);
}

class AgentPricesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.Join("ckpt"));
    auto store = FileStore::Open(dir_.Join("store"));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }
  AgentResult Run(std::optional<InstanceIdentity> identity) {
    ConfigSources sources;
    sources.flags = {{"job", "job"},
                     {"store", "file://" + dir_.Join("store")},
                     {"checkpoint_dir", dir_.Join("ckpt")},
                     {"preset", "pytorch"},
                     {"upload_interval", "60s"},
                     {"imds.poll_interval", "1s"}};
    sources.command_args = {"/nonexistent/trainer"};
    ConfigResult loaded = LoadConfig(sources, ConfigNeeds{true, true, true});
    EXPECT_TRUE(loaded.ok());
    config_ = loaded.config;
    AgentPorts ports = w_.Ports();
    ports.prices = fake_.Readers();
    AgentContext context{config_,   env_,     *store_, w_.clock, &w_.imds,
                         notifier_, "i-test", nullptr, ports};
    context.identity = identity;
    return RunAgent(context);
  }
  std::vector<nlohmann::json> PriceEvents() {
    auto events = ReadJobEvents(*store_, "job");
    EXPECT_TRUE(events.ok());
    std::vector<nlohmann::json> out;
    for (const auto& e : *events) {
      if (e["kind"] == "prices") out.push_back(e);
    }
    return out;
  }

  TempDir dir_;
  std::unique_ptr<ObjectStore> store_;
  std::map<std::string, std::string> env_;
  SystemdNotifier notifier_{env_};
  Config config_;
  FakeJobWorld w_;
  CountingReaders fake_;
};

TEST_F(AgentPricesTest, ThePricesAreReadOnceAndRecordedWithTheAttempt) {
  w_.At(seconds(5), [&] { w_.checkpoints.Write(100); });
  w_.At(seconds(9), [&] { w_.launcher.trainer->Exit(ExitStatus{}); });
  EXPECT_EQ(Run(kG5).exit_code, kExitOk);
  EXPECT_EQ(fake_.spot_calls, 1);
  EXPECT_EQ(fake_.on_demand_calls, 1);
  const std::vector<nlohmann::json> prices = PriceEvents();
  ASSERT_EQ(prices.size(), 1u);
  EXPECT_DOUBLE_EQ(prices[0]["spot"]["usd_per_hour"].get<double>(), 0.4523);
  // The ledger takes them for the attempt.
  auto events = ReadJobEvents(*store_, "job");
  ASSERT_TRUE(events.ok());
  const Ledger ledger = BuildLedger(*events);
  ASSERT_EQ(ledger.attempts.size(), 1u);
  EXPECT_EQ(ledger.attempts[0].spot_price, 0.4523);
  EXPECT_EQ(ledger.attempts[0].on_demand_price, 1.006);
}

TEST_F(AgentPricesTest, APriceThatCannotBeReadDelaysNothingAndIsRecordedAsAnError) {
  fake_.spot_fails = Status::Unavailable("no answer from https://ec2.eu-west-3.amazonaws.com");
  w_.At(seconds(5), [&] { w_.checkpoints.Write(100); });
  w_.At(seconds(9), [&] { w_.launcher.trainer->Exit(ExitStatus{}); });
  EXPECT_EQ(Run(kG5).exit_code, kExitOk);
  ASSERT_EQ(w_.uploader.committed.size(), 1u);
  const std::vector<nlohmann::json> prices = PriceEvents();
  ASSERT_EQ(prices.size(), 1u);
  EXPECT_TRUE(prices[0]["spot"].contains("error"));
  EXPECT_TRUE(prices[0]["on_demand"].contains("usd_per_hour"));
}

TEST_F(AgentPricesTest, WithoutTheInstanceNothingIsRead) {
  w_.At(seconds(2), [&] { w_.launcher.trainer->Exit(ExitStatus{}); });
  EXPECT_EQ(Run(std::nullopt).exit_code, kExitOk);
  EXPECT_EQ(fake_.spot_calls + fake_.on_demand_calls, 0);
  EXPECT_TRUE(PriceEvents().empty());
}

nlohmann::json PriceEv(const std::string& id, int sec, const std::string& kind,
                       nlohmann::json details = nlohmann::json::object()) {
  details["kind"] = kind;
  details["time"] = FormatLedgerTime(1'795'000'000'000 + sec * 1000LL);
  details["attempt_id"] = id;
  details["instance"] = id;
  return details;
}

// Two hours on spot, measured at 0.5 (spot) and 2.0 (on demand) per hour.
std::vector<nlohmann::json> MeasuredAttempt() {
  return {PriceEv("a", 0, "agent-start", {{"instance_type", "g5.xlarge"}, {"lifecycle", "spot"}}),
          PriceEv("a", 1, "prices",
                  {{"spot", {{"usd_per_hour", 0.5}, {"source", "ec2"}}},
                   {"on_demand", {{"usd_per_hour", 2.0}, {"source", "pricing"}}}}),
          PriceEv("a", 7200, "exit", {{"reason", "complete"}})};
}

TEST(ReportMeasuredPrices, TheCostComesFromThePricesTheAgentMeasured) {
  const nlohmann::ordered_json r = BuildReport({"job", MeasuredAttempt(), std::nullopt, {}});
  ASSERT_FALSE(r["cost"].is_null());
  EXPECT_DOUBLE_EQ(r["cost"]["usd"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(r["cost"]["on_demand_usd"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(r["cost"]["saving_usd"].get<double>(), 3.0);
  EXPECT_EQ(r["cost"]["prices"], "measured");
  EXPECT_EQ(r["attempts"][0]["price_source"], "measured");
  EXPECT_EQ(r["attempts"][0]["on_demand_price_source"], "measured");
  EXPECT_DOUBLE_EQ(r["attempts"][0]["cost_usd"].get<double>(), 1.0);
  const std::string text = ReportToText(r);
  EXPECT_NE(text.find("saving $3.00 (75%); prices measured"), std::string::npos) << text;
  EXPECT_NE(text.find("$1.00 at $0.5000/h (measured)"), std::string::npos) << text;
  const std::string page = ReportToHtml(r);
  EXPECT_NE(page.find("saving $3.00 (75%); prices measured"), std::string::npos);
  EXPECT_NE(page.find("<td class=\"price\">$0.5000/h measured</td><td>$1.00</td>"),
            std::string::npos);
}

TEST(ReportMeasuredPrices, AConfiguredPriceWinsOverTheMeasuredOneEachOnItsOwn) {
  auto set = ParsePrices({"g5.xlarge=0.25/"});  // spot configured, on demand left to the agent
  ASSERT_TRUE(set.ok());
  const nlohmann::ordered_json r = BuildReport({"job", MeasuredAttempt(), std::nullopt, *set});
  EXPECT_DOUBLE_EQ(r["cost"]["usd"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r["cost"]["on_demand_usd"].get<double>(), 4.0);
  EXPECT_EQ(r["cost"]["prices"], "measured and configured");
  EXPECT_EQ(r["attempts"][0]["price_source"], "configured");
  EXPECT_EQ(r["attempts"][0]["on_demand_price_source"], "measured");
}

TEST(ReportMeasuredPrices, APriceThatFailedToBeReadLeavesTheAttemptUnpriced) {
  std::vector<nlohmann::json> events = MeasuredAttempt();
  events[1]["spot"] = {{"error", "AccessDenied"}, {"source", "ec2"}};
  const nlohmann::ordered_json r = BuildReport({"job", events, std::nullopt, {}});
  EXPECT_TRUE(r["cost"].is_null()) << r["cost"].dump();
  EXPECT_TRUE(r["attempts"][0]["cost_usd"].is_null());
  EXPECT_TRUE(r["attempts"][0]["price_source"].is_null());
}

}  // namespace
}  // namespace sg::testing
