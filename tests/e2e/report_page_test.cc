// The page of `spotguard report --html` in headless Chromium (Debian's
// chromium): it loads without a console error, and its own script finds one
// lane per node and one bar per attempt of a 3-node group. The metrics
// file's format through promtool (Debian's prometheus).
#include <gtest/gtest.h>

#include "agent/ledger/events.h"
#include "agent/run/metrics_file.h"
#include "common/clock.h"
#include "common/file_store.h"
#include "common/files.h"
#include "tests/support/chromium.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

using namespace std::chrono_literals;

// A 3-node group: node 1 interrupted and replaced, so 4 attempts.
void WriteGroupEvents(ObjectStore& store) {
  const Clock::WallTime t0 = SystemClock().Now() - std::chrono::hours(1);
  auto at = [&](int sec) { return t0 + std::chrono::seconds(sec); };
  struct Run {
    std::string id;
    int node, from, to;
    bool interrupted;
  };
  for (const Run& r : {Run{"i-a", 0, 0, 600, false}, Run{"i-b", 1, 0, 200, true},
                       Run{"i-d", 1, 260, 600, false}, Run{"i-c", 2, 0, 600, false}}) {
    EventLog log(store, SystemClock(), "job", r.id, r.id + "-attempt");
    log.SetNode(r.node);
    (void)log.Record("agent-start", {{"instance_type", "g5.xlarge"}, {"lifecycle", "spot"}},
                     at(r.from));
    (void)log.Record("lease", {}, at(r.from + 2));
    (void)log.Record("start", {}, at(r.from + 10));
    if (r.node == 0) (void)log.Record("snapshot", {{"step", 500}}, at(150));
    if (r.interrupted) (void)log.Record("notice", {}, at(r.to - 20));
    (void)log.Record("exit", {{"reason", r.interrupted ? "notice" : "complete"}}, at(r.to));
  }
}

TEST(ReportPage, LoadsInChromiumWithOneLanePerNodeAndOneBarPerAttempt) {
  if (!Installed("chromium")) GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh)";
  TempDir dir;
  auto store = FileStore::Open(dir.Join("store"));
  ASSERT_TRUE(store.ok());
  WriteGroupEvents(**store);
  const std::string page = dir.Join("report.html");
  const CommandResult r = RunCommand({SPOTGUARD_BIN, "report", "--job", "job", "--store",
                                      "file://" + dir.Join("store"), "--html", page},
                                     {{"SPOTGUARD_CONFIG", ""}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("4 attempts on 3 nodes"), std::string::npos) << r.out;
  const CommandResult dom = DumpDom(dir, page);
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  EXPECT_NE(dom.out.find("data-rendered=\"lanes=3 bars=4\""), std::string::npos) << dom.out;
  EXPECT_FALSE(ConsoleError(dom.err)) << dom.err;
  auto html = ReadFileToString(page);
  ASSERT_TRUE(html.ok());
  EXPECT_EQ(html->find("http://"), std::string::npos) << "nothing fetched at view time";
  EXPECT_EQ(html->find("https://"), std::string::npos);
}

// The check above would see a script error: a page that throws is caught.
TEST(ReportPage, TheConsoleCheckSeesAScriptError) {
  if (!Installed("chromium")) GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh)";
  TempDir dir;
  const std::string page = dir.WriteFile(
      "broken.html", "<!DOCTYPE html><html><body><script>throw new Error('broken');</script>"
                     "</body></html>");
  const CommandResult dom = DumpDom(dir, page);
  EXPECT_TRUE(ConsoleError(dom.err)) << dom.err;
}

TEST(MetricsFileFormat, PromtoolAcceptsTheMetricsFile) {
  if (!Installed("promtool")) GTEST_SKIP() << "promtool is not installed (scripts/install-deps.sh)";
  TempDir dir;
  const std::string path = dir.Join("spotguard.prom");
  MetricsFile metrics(path, "job \"quoted\"", "i-1-attempt");
  const Clock::WallTime t0 = SystemClock().Now();
  metrics.Observe("agent-start", {}, t0);
  metrics.Observe("lease", {}, t0 + 1s);
  metrics.Observe("start", {}, t0 + 2s);
  metrics.Observe("snapshot", {{"step", 40}, {"new_bytes", 1000}, {"reused_bytes", 500}}, t0 + 9s);
  metrics.Observe("notice", {}, t0 + 10s);
  metrics.Observe("stop", {{"notice_to_commit_seconds", 3.5}}, t0 + 14s);
  metrics.Tick(t0 + 15s, "stopping");
  const CommandResult check =
      RunCommand({"/bin/sh", "-c", "promtool check metrics < '" + path + "'"});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  // promtool does see a broken file.
  const std::string bad = dir.WriteFile("bad.prom", "spotguard_phase{job=\"x\" 1\n");
  EXPECT_NE(RunCommand({"/bin/sh", "-c", "promtool check metrics < '" + bad + "'"}).exit_code, 0);
}

}  // namespace
}  // namespace sg::testing
