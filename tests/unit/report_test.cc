// `spotguard report`'s pieces without the store: the report object and its
// text (agent/cli/report.h), the page (agent/cli/report_html.h) and the metrics file
// (agent/run/metrics_file.h), from hand-built events at chosen times.
#include "agent/cli/report.h"

#include <gtest/gtest.h>

#include "agent/run/metrics_file.h"
#include "agent/cli/report_html.h"
#include "common/files.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

using namespace std::chrono_literals;

constexpr LedgerMs kReportT0 = 1'795'000'000'000;

nlohmann::json ReportEv(const std::string& id, int sec, const std::string& kind,
                  nlohmann::json details = nlohmann::json::object()) {
  details["kind"] = kind;
  details["time"] = FormatLedgerTime(kReportT0 + sec * 1000);
  details["attempt_id"] = id;
  details["instance"] = id;
  return details;
}

std::vector<nlohmann::json> TwoAttempts() {
  return {ReportEv("a", 0, "agent-start"), ReportEv("a", 1, "lease"), ReportEv("a", 2, "start"),
          ReportEv("a", 20, "snapshot", {{"step", 10}}), ReportEv("a", 40, "notice"),
          ReportEv("a", 45, "exit", {{"reason", "notice"}}),
          ReportEv("b", 50, "agent-start", {{"instance_type", "<b>type</b>"}}), ReportEv("b", 51, "lease"),
          ReportEv("b", 52, "restore-start"), ReportEv("b", 55, "restore"), ReportEv("b", 56, "start"),
          ReportEv("b", 70, "snapshot", {{"step", 30}}), ReportEv("b", 71, "exit", {{"reason", "complete"}})};
}

TEST(Report, TheObjectHasTheAttemptsTheCausesAndTheLongestLoss) {
  const nlohmann::ordered_json r = BuildReport({"job", TwoAttempts(), std::nullopt, {}});
  ASSERT_EQ(r["attempts"].size(), 2u);
  EXPECT_EQ(r["interruptions"], 1);
  EXPECT_DOUBLE_EQ(r["span_seconds"].get<double>(), 71.0);
  EXPECT_DOUBLE_EQ(r["goodput"]["lost_work"].get<double>(), 20.0);  // 20..40
  EXPECT_DOUBLE_EQ(r["goodput"]["restore"].get<double>(), 3.0);
  EXPECT_EQ(r["longest_loss"]["attempt"], "a");
  EXPECT_EQ(r["attempts"][1]["resumed_step"], 10);
  const std::string text = ReportToText(r);
  EXPECT_NE(text.find("2 attempts on 1 node"), std::string::npos) << text;
  EXPECT_NE(text.find("interruptions: 1"), std::string::npos) << text;
  EXPECT_NE(text.find("longest loss: 20.0 s of work, attempt a"), std::string::npos) << text;
}

// Every change of the checkpoint interval is in the report (issue 35: "so
// report can show it"): per attempt in the object, the count and the newest
// in the text.
TEST(Report, TheCheckpointIntervalsChangesAreShown) {
  std::vector<nlohmann::json> events = TwoAttempts();
  events.push_back(ReportEv("a", 3, "cadence",
                            {{"interval_seconds", 657.3}, {"cost_seconds", 60.0},
                             {"mtbf_seconds", 3600.0}, {"rate_factor", 1.0}, {"why", "start"}}));
  events.push_back(ReportEv("b", 60, "cadence",
                            {{"interval_seconds", 207.8}, {"cost_seconds", 60.0},
                             {"mtbf_seconds", 360.0}, {"rate_factor", 10.0},
                             {"why", "rebalance recommendation"}}));
  const nlohmann::ordered_json r = BuildReport({"job", events, std::nullopt, {}});
  ASSERT_EQ(r["attempts"].size(), 2u);
  ASSERT_EQ(r["attempts"][0]["cadence"].size(), 1u);
  EXPECT_EQ(r["attempts"][0]["cadence"][0]["why"], "start");
  ASSERT_EQ(r["attempts"][1]["cadence"].size(), 1u);
  EXPECT_DOUBLE_EQ(r["attempts"][1]["cadence"][0]["rate_factor"].get<double>(), 10.0);
  const std::string text = ReportToText(r);
  EXPECT_NE(text.find("checkpoint interval (checkpoint_cadence auto): 2 changes, newest 208 s on "
                      "node 0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(rebalance recommendation; C 60.0 s, MTBF 360 s)"), std::string::npos)
      << text;
  EXPECT_EQ(ReportToText(BuildReport({"job", TwoAttempts(), std::nullopt, {}}))
                .find("checkpoint interval"),
            std::string::npos)
      << "no line without a cadence";
}

TEST(Report, SinceKeepsOnlyTheAttemptsThatRanSinceThen) {
  const nlohmann::ordered_json r = BuildReport({"job", TwoAttempts(), kReportT0 + 48'000, {}});
  ASSERT_EQ(r["attempts"].size(), 1u);
  EXPECT_EQ(r["attempts"][0]["id"], "b");
  EXPECT_EQ(r["interruptions"], 0);
}

TEST(Report, AJobWithoutEventsSaysSo) {
  const nlohmann::ordered_json r = BuildReport({"job", {}, std::nullopt, {}});
  EXPECT_NE(ReportToText(r).find("no events in the store"), std::string::npos);
  EXPECT_NE(ReportToHtml(r).find("data-rendered"), std::string::npos);
}

TEST(ReportPage, StringsFromTheStoreAreEscapedAndNothingIsFetched) {
  const std::string html = ReportToHtml(BuildReport({"job<x>", TwoAttempts(), std::nullopt, {}}));
  EXPECT_EQ(html.find("<b>type</b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;type&lt;/b&gt;"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  // One lane, two bars; lost work shaded with the pattern.
  size_t bars = 0;
  for (size_t at = html.find("class=\"attempt\""); at != std::string::npos;
       at = html.find("class=\"attempt\"", at + 1)) {
    ++bars;
  }
  EXPECT_EQ(bars, 2u);
  EXPECT_NE(html.find("class=\"seg c-lost_work\""), std::string::npos) << "a bar shaded as lost";
  EXPECT_NE(html.find("class=\"notice\""), std::string::npos);
}

TEST(MetricsFile, IsRewrittenEveryFiveSecondsWithTheAttemptsFigures) {
  TempDir dir;
  const std::string path = dir.Join("m.prom");
  MetricsFile m(path, "job", "a");
  const Clock::WallTime t0 = Clock::WallTime(std::chrono::milliseconds(kReportT0));
  m.Observe("agent-start", {}, t0);
  m.Observe("start", {}, t0 + 2s);
  m.Observe("snapshot", {{"step", 40}, {"new_bytes", 1000}, {"reused_bytes", 500}}, t0 + 10s);
  m.Observe("crash", {}, t0 + 11s);
  m.Tick(t0 + 12s, "training");
  auto text = ReadFileToString(path);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("spotguard_committed_step{job=\"job\"} 40\n"), std::string::npos) << *text;
  EXPECT_NE(text->find("spotguard_seconds_since_last_commit{job=\"job\"} 2\n"), std::string::npos);
  EXPECT_NE(text->find("spotguard_uploaded_bytes_total{job=\"job\"} 1000\n"), std::string::npos);
  EXPECT_NE(text->find("spotguard_reused_bytes_total{job=\"job\"} 500\n"), std::string::npos);
  EXPECT_NE(text->find("spotguard_trainer_restarts_total{job=\"job\"} 1\n"), std::string::npos);
  EXPECT_NE(text->find("spotguard_phase{job=\"job\",phase=\"training\"} 1\n"), std::string::npos);
  EXPECT_NE(text->find("spotguard_phase{job=\"job\",phase=\"lease\"} 0\n"), std::string::npos);
  EXPECT_NE(text->find("spotguard_goodput_seconds_total{job=\"job\",cause=\"startup\"} 2\n"),
            std::string::npos)
      << *text;
  // Not again within five seconds; then again.
  m.Observe("snapshot", {{"step", 50}}, t0 + 13s);
  m.Tick(t0 + 16s, "training");
  EXPECT_EQ(ReadFileToString(path).value().find("} 50\n"), std::string::npos);
  m.Tick(t0 + 17s, "training");
  EXPECT_NE(ReadFileToString(path).value().find("spotguard_committed_step{job=\"job\"} 50\n"),
            std::string::npos);
}

TEST(MetricsFile, WithoutAPathNothingIsWritten) {
  TempDir dir;
  MetricsFile m("", "job", "a");
  m.Observe("start", {}, Clock::WallTime{});
  m.Tick(Clock::WallTime{}, "training", /*force=*/true);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace sg::testing

namespace sg::testing {
namespace {

TEST(ReportCost, HoursAtTheConfiguredPricesAndTheSameHoursOnDemand) {
  std::vector<nlohmann::json> events = {
      ReportEv("a", 0, "agent-start", {{"instance_type", "g5.xlarge"}, {"lifecycle", "spot"}}),
      ReportEv("a", 3600, "exit", {{"reason", "notice"}}),
      ReportEv("b", 3600, "agent-start", {{"instance_type", "g5.xlarge"}, {"lifecycle", "on-demand"}}),
      ReportEv("b", 5400, "exit", {{"reason", "complete"}}),
  };
  auto prices = ParsePrices({"g5.xlarge=0.5/1.5"});
  ASSERT_TRUE(prices.ok());
  const nlohmann::ordered_json r = BuildReport({"job", events, std::nullopt, *prices});
  ASSERT_FALSE(r["cost"].is_null());
  EXPECT_DOUBLE_EQ(r["cost"]["usd"].get<double>(), 0.5 + 0.75);  // 1 h spot, 0.5 h on demand
  EXPECT_DOUBLE_EQ(r["cost"]["on_demand_usd"].get<double>(), 1.5 + 0.75);
  EXPECT_DOUBLE_EQ(r["cost"]["saving_usd"].get<double>(), 1.0);
  EXPECT_EQ(r["cost"]["prices"], "configured");
  EXPECT_TRUE(r["cost"]["complete"].get<bool>());
  EXPECT_NE(ReportToText(r).find("cost: $1.25 for 1.50 instance-hours; on demand $2.25; saving "
                                 "$1.00 (44%); prices configured"),
            std::string::npos)
      << ReportToText(r);
  // Without prices the cost is unknown, and says so.
  const nlohmann::ordered_json none = BuildReport({"job", events, std::nullopt, {}});
  EXPECT_TRUE(none["cost"].is_null());
  EXPECT_NE(ReportToText(none).find("cost: unknown"), std::string::npos);
}

TEST(ReportCost, PricesThatDoNotParseAreRefusedNamingTheEntry) {
  EXPECT_TRUE(ParsePrices({"g5.xlarge=/1.006", "m5.large=0.03/"}).ok());
  for (const char* bad : {"g5.xlarge", "g5.xlarge=0.4", "=0.4/1", "g5.xlarge=abc/1",
                          "g5.xlarge=-1/1"}) {
    auto p = ParsePrices({bad});
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.status().message().find(bad[0] == '=' ? "=0.4/1" : "g5.xlarge"), std::string::npos)
        << p.status().message();
  }
  EXPECT_FALSE(ParsePrices({"a=1/2", "a=1/3"}).ok());
}

}  // namespace
}  // namespace sg::testing
