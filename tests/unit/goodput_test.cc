// Goodput by cause (agent/goodput.h) over hand-built ledgers: each test is a
// timeline of events at chosen seconds, and the causes are checked to the
// millisecond, with their sum equal to the span.
#include "agent/goodput.h"

#include <gtest/gtest.h>

#include "agent/ledger.h"

namespace sg::testing {
namespace {

constexpr LedgerMs kT0 = 1'795'000'000'000;  // 2026-11-18T..., a whole second

// An event of attempt `id` at `sec` seconds after kT0.
nlohmann::json Ev(const std::string& id, double sec, const std::string& kind,
                  nlohmann::json details = nlohmann::json::object()) {
  details["kind"] = kind;
  details["time"] = FormatLedgerTime(kT0 + static_cast<LedgerMs>(sec * 1000));
  details["attempt_id"] = id;
  details["instance"] = "i-" + id;
  return details;
}

std::string At(double sec) { return FormatLedgerTime(kT0 + static_cast<LedgerMs>(sec * 1000)); }

int64_t Sec(const CauseMs& ms, Cause c) { return ms[static_cast<size_t>(c)] / 1000; }

// Attempt a: launched at 0, a notice at 50 s answered at 53 s and committed
// at 56 s. Attempt b: launched at 70 s, restores, and completes.
std::vector<nlohmann::json> InterruptedThenCompleted() {
  return {
      Ev("a", 10, "agent-start", {{"instance_type", "g5.xlarge"}, {"launch_time", At(0)},
                                  {"lifecycle", "spot"}, {"availability_zone", "us-east-1a"}}),
      Ev("a", 11, "lease"),
      Ev("a", 11, "restore-start"),
      Ev("a", 12, "start"),
      Ev("a", 30, "snapshot", {{"step", 100}, {"checkpoint_time", At(28)}}),
      Ev("a", 50, "notice"),
      Ev("a", 50, "checkpoint-request", {{"signal", true}}),
      Ev("a", 53, "checkpoint-answer", {{"answered", true}, {"step", 150}}),
      Ev("a", 56, "snapshot", {{"step", 150}, {"checkpoint_time", At(53)}}),
      Ev("a", 57, "trainer-stop"),
      Ev("a", 58, "exit", {{"code", 75}, {"reason", "notice"}}),
      Ev("b", 80, "agent-start", {{"launch_time", At(70)}}),
      Ev("b", 81, "lease"),
      Ev("b", 81, "restore-start"),
      Ev("b", 90, "restore"),
      Ev("b", 91, "start"),
      Ev("b", 120, "trainer-exit"),
      Ev("b", 123, "snapshot", {{"step", 300}, {"checkpoint_time", At(120)}}),
      Ev("b", 124, "complete"),
      Ev("b", 125, "exit", {{"code", 0}, {"reason", "complete"}}),
  };
}

TEST(Ledger, EventsAreGroupedIntoAttemptsWithTheirInstanceAndMoments) {
  auto events = InterruptedThenCompleted();
  std::reverse(events.begin(), events.end());  // any order
  const Ledger ledger = BuildLedger(events);
  ASSERT_EQ(ledger.attempts.size(), 2u);
  const LedgerAttempt& a = ledger.attempts[0];
  EXPECT_EQ(a.id, "a");
  EXPECT_EQ(a.node, "0");
  EXPECT_EQ(a.instance_type, "g5.xlarge");
  EXPECT_EQ(a.lifecycle, "spot");
  EXPECT_EQ(a.availability_zone, "us-east-1a");
  EXPECT_EQ(a.launch, kT0);
  EXPECT_EQ(a.commits.size(), 2u);
  EXPECT_EQ(a.commits[1].checkpoint_time, kT0 + 53'000);
  EXPECT_EQ(a.exit_reason, "notice");
  EXPECT_EQ(a.exit_code, 75);
  EXPECT_EQ(ledger.attempts[1].restore_end, kT0 + 90'000);
}

TEST(Ledger, TimesKeepTheirMilliseconds) {
  EXPECT_EQ(ParseLedgerTime("2026-11-22T08:22:00.123Z").value() % 1000, 123);
  EXPECT_EQ(ParseLedgerTime("2026-11-22T08:22:00Z").value() % 1000, 0);
  EXPECT_FALSE(ParseLedgerTime("yesterday").has_value());
  EXPECT_EQ(ParseLedgerTime(FormatLedgerTime(kT0 + 7)), kT0 + 7);
}

TEST(Ledger, EventsOfOlderAgentsWithoutAnAttemptIdGroupByInstance) {
  nlohmann::json e1 = Ev("x", 1, "start"), e2 = Ev("x", 2, "stop");
  e1.erase("attempt_id");
  e2.erase("attempt_id");
  const Ledger ledger = BuildLedger({e1, e2});
  ASSERT_EQ(ledger.attempts.size(), 1u);
  EXPECT_EQ(ledger.attempts[0].id, "i-x");
}

TEST(Goodput, AnInterruptionAnsweredInTimeLosesNoWorkAndTheCausesAddUpToTheSpan) {
  const Ledger ledger = BuildLedger(InterruptedThenCompleted());
  const Goodput g = ComputeGoodput(ledger);
  ASSERT_EQ(g.attempts.size(), 2u);
  const CauseMs& a = g.attempts[0].ms;
  EXPECT_EQ(Sec(a, Cause::kStartup), 11);  // launch..agent 10, lease..trainer 1
  EXPECT_EQ(Sec(a, Cause::kWaiting), 1);   // the lease
  EXPECT_EQ(Sec(a, Cause::kProductive), 38);  // 12..50: kept by the answer at 53
  EXPECT_EQ(Sec(a, Cause::kLostWork), 0);
  EXPECT_EQ(Sec(a, Cause::kCheckpointAnswer), 3);
  EXPECT_EQ(Sec(a, Cause::kShutdown), 5);
  const CauseMs& b = g.attempts[1].ms;
  EXPECT_EQ(Sec(b, Cause::kWaiting), 12 + 1);  // 58..70 between the attempts, and the lease
  EXPECT_EQ(Sec(b, Cause::kRestore), 9);
  EXPECT_EQ(Sec(b, Cause::kStartup), 11);
  EXPECT_EQ(Sec(b, Cause::kProductive), 29);
  EXPECT_EQ(Sec(b, Cause::kShutdown), 5);
  int64_t sum = 0;
  for (int64_t ms : g.total) sum += ms;
  EXPECT_EQ(sum, g.last - g.first);
  EXPECT_EQ(g.last - g.first, 125'000);
  EXPECT_EQ(g.interruptions, 1);
  EXPECT_EQ(g.attempts[1].resumed_step, 150);
  EXPECT_EQ(g.newest_step, 300);
  EXPECT_NEAR(g.steps_per_productive_hour, 300.0 / (67.0 / 3600.0), 1e-6);
  EXPECT_NEAR(*g.mtbf_hours, 125.0 / 3600.0 - 12.0 / 3600.0, 1e-9);  // instance time, gap excluded
  EXPECT_NEAR(g.interruptions_per_instance_day, 24.0 / *g.mtbf_hours, 1e-6);
  EXPECT_EQ(g.checkpoint.samples, 1);
  EXPECT_DOUBLE_EQ(g.checkpoint.mean_request_to_answer, 3.0);
  EXPECT_DOUBLE_EQ(g.checkpoint.mean_answer_to_commit, 3.0);
}

TEST(Goodput, WorkAfterTheNewestCommittedCheckpointIsLostWhenTheAnswerDoesNotCome) {
  std::vector<nlohmann::json> events = {
      Ev("a", 0, "agent-start"),
      Ev("a", 1, "lease"),
      Ev("a", 2, "start"),
      Ev("a", 30, "snapshot", {{"step", 100}, {"checkpoint_time", At(28)}}),
      Ev("a", 50, "notice"),
      Ev("a", 50, "checkpoint-request", {{"signal", false}}),
      Ev("a", 55, "checkpoint-answer", {{"answered", false}}),
      Ev("a", 56, "trainer-stop"),
      Ev("a", 57, "exit", {{"code", 75}, {"reason", "notice"}}),
      Ev("b", 60, "agent-start"),
      Ev("b", 61, "lease"),
      Ev("b", 61, "restore-start"),
      Ev("b", 64, "restore"),
      Ev("b", 65, "start"),
      Ev("b", 70, "exit", {{"code", 143}, {"reason", "signal"}}),
  };
  const Goodput g = ComputeGoodput(BuildLedger(events));
  ASSERT_EQ(g.attempts.size(), 2u);
  const CauseMs& a = g.attempts[0].ms;
  EXPECT_EQ(Sec(a, Cause::kProductive), 26);  // 2..28
  EXPECT_EQ(Sec(a, Cause::kLostWork), 22);    // 28..50
  EXPECT_EQ(Sec(a, Cause::kCheckpointAnswer), 5);
  EXPECT_EQ(Sec(a, Cause::kShutdown), 2);
  // b committed nothing and has no successor: its training is lost too.
  EXPECT_EQ(Sec(g.attempts[1].ms, Cause::kLostWork), 5);
  ASSERT_TRUE(g.longest_loss.has_value());
  EXPECT_EQ(*g.longest_loss, 0u);
  EXPECT_EQ(g.checkpoint.samples, 0);  // unanswered requests measure nothing
  int64_t sum = 0;
  for (int64_t ms : g.total) sum += ms;
  EXPECT_EQ(sum, 70'000);
}

TEST(Goodput, EachNodeOfAGroupIsItsOwnLaneAndItsCausesAddUpToItsSpan) {
  std::vector<nlohmann::json> events;
  for (int node = 0; node < 3; ++node) {
    const std::string id = "n" + std::to_string(node);
    events.push_back(Ev(id, node, "agent-start"));
    events.push_back(Ev(id, 5, "lease"));
    events.push_back(Ev(id, 6, "start", {{"node", node}}));
    events.push_back(Ev(id, 40 + node, "exit", {{"reason", "complete"}}));
  }
  events.push_back(Ev("n0", 20, "snapshot", {{"step", 10}}));
  const Ledger ledger = BuildLedger(events);
  ASSERT_EQ(ledger.attempts.size(), 3u);
  EXPECT_EQ(ledger.attempts[2].node, "2");
  const Goodput g = ComputeGoodput(ledger);
  int64_t spans = 0;
  for (const AttemptGoodput& a : g.attempts) {
    int64_t sum = 0;
    for (int64_t ms : a.ms) sum += ms;
    EXPECT_EQ(sum, a.end - a.begin);
    spans += a.end - a.begin;
    EXPECT_EQ(Sec(a.ms, Cause::kLostWork), 0) << "a completed job keeps its work";
  }
  EXPECT_EQ(g.node_ms, spans);
}

TEST(Goodput, AnEmptyLedgerHasNothing) {
  const Goodput g = ComputeGoodput(Ledger{});
  EXPECT_TRUE(g.attempts.empty());
  EXPECT_EQ(g.node_ms, 0);
  EXPECT_FALSE(g.mtbf_hours.has_value());
}

}  // namespace
}  // namespace sg::testing
