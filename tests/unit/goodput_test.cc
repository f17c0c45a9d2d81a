// Goodput by cause (agent/ledger/goodput.h) over hand-built ledgers: each test is a
// timeline of events at chosen seconds, and the causes are checked to the
// millisecond, with their sum equal to the span.
#include "agent/ledger/goodput.h"

#include <gtest/gtest.h>

#include "agent/ledger/ledger.h"

namespace sg::testing {
namespace {

constexpr LedgerMs kLedgerT0 = 1'795'000'000'000;  // 2026-11-18T..., a whole second

// An event of attempt `id` at `sec` seconds after kLedgerT0.
nlohmann::json LedgerEv(const std::string& id, double sec, const std::string& kind,
                  nlohmann::json details = nlohmann::json::object()) {
  details["kind"] = kind;
  details["time"] = FormatLedgerTime(kLedgerT0 + static_cast<LedgerMs>(sec * 1000));
  details["attempt_id"] = id;
  details["instance"] = "i-" + id;
  return details;
}

std::string LedgerAt(double sec) { return FormatLedgerTime(kLedgerT0 + static_cast<LedgerMs>(sec * 1000)); }

int64_t CauseSec(const CauseMs& ms, Cause c) { return ms[static_cast<size_t>(c)] / 1000; }

// Attempt a: launched at 0, a notice at 50 s answered at 53 s and committed
// at 56 s. Attempt b: launched at 70 s, restores, and completes.
std::vector<nlohmann::json> InterruptedThenCompleted() {
  return {
      LedgerEv("a", 10, "agent-start", {{"instance_type", "g5.xlarge"}, {"launch_time", LedgerAt(0)},
                                  {"lifecycle", "spot"}, {"availability_zone", "us-east-1a"}}),
      LedgerEv("a", 11, "lease"),
      LedgerEv("a", 11, "restore-start"),
      LedgerEv("a", 12, "start"),
      LedgerEv("a", 30, "snapshot", {{"step", 100}, {"checkpoint_time", LedgerAt(28)}}),
      LedgerEv("a", 50, "notice"),
      LedgerEv("a", 50, "checkpoint-request", {{"signal", true}}),
      LedgerEv("a", 53, "checkpoint-answer", {{"answered", true}, {"step", 150}}),
      LedgerEv("a", 56, "snapshot", {{"step", 150}, {"checkpoint_time", LedgerAt(53)}}),
      LedgerEv("a", 57, "trainer-stop"),
      LedgerEv("a", 58, "exit", {{"code", 75}, {"reason", "notice"}}),
      LedgerEv("b", 80, "agent-start", {{"launch_time", LedgerAt(70)}}),
      LedgerEv("b", 81, "lease"),
      LedgerEv("b", 81, "restore-start"),
      LedgerEv("b", 90, "restore"),
      LedgerEv("b", 91, "start"),
      LedgerEv("b", 120, "trainer-exit"),
      LedgerEv("b", 123, "snapshot", {{"step", 300}, {"checkpoint_time", LedgerAt(120)}}),
      LedgerEv("b", 124, "complete"),
      LedgerEv("b", 125, "exit", {{"code", 0}, {"reason", "complete"}}),
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
  EXPECT_EQ(a.launch, kLedgerT0);
  EXPECT_EQ(a.commits.size(), 2u);
  EXPECT_EQ(a.commits[1].checkpoint_time, kLedgerT0 + 53'000);
  EXPECT_EQ(a.exit_reason, "notice");
  EXPECT_EQ(a.exit_code, 75);
  EXPECT_EQ(ledger.attempts[1].restore_end, kLedgerT0 + 90'000);
}

TEST(Ledger, TimesKeepTheirMilliseconds) {
  EXPECT_EQ(ParseLedgerTime("2026-11-22T08:22:00.123Z").value() % 1000, 123);
  EXPECT_EQ(ParseLedgerTime("2026-11-22T08:22:00Z").value() % 1000, 0);
  EXPECT_FALSE(ParseLedgerTime("yesterday").has_value());
  EXPECT_EQ(ParseLedgerTime(FormatLedgerTime(kLedgerT0 + 7)), kLedgerT0 + 7);
}

TEST(Ledger, EventsOfOlderAgentsWithoutAnAttemptIdGroupByInstance) {
  nlohmann::json e1 = LedgerEv("x", 1, "start"), e2 = LedgerEv("x", 2, "stop");
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
  EXPECT_EQ(CauseSec(a, Cause::kStartup), 11);  // launch..agent 10, lease..trainer 1
  EXPECT_EQ(CauseSec(a, Cause::kWaiting), 1);   // the lease
  EXPECT_EQ(CauseSec(a, Cause::kProductive), 38);  // 12..50: kept by the answer at 53
  EXPECT_EQ(CauseSec(a, Cause::kLostWork), 0);
  EXPECT_EQ(CauseSec(a, Cause::kCheckpointAnswer), 3);
  EXPECT_EQ(CauseSec(a, Cause::kShutdown), 5);
  const CauseMs& b = g.attempts[1].ms;
  EXPECT_EQ(CauseSec(b, Cause::kWaiting), 12 + 1);  // 58..70 between the attempts, and the lease
  EXPECT_EQ(CauseSec(b, Cause::kRestore), 9);
  EXPECT_EQ(CauseSec(b, Cause::kStartup), 11);
  EXPECT_EQ(CauseSec(b, Cause::kProductive), 29);
  EXPECT_EQ(CauseSec(b, Cause::kShutdown), 5);
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
  EXPECT_EQ(g.checkpoint.commit_samples, 1);
}

TEST(Goodput, WorkAfterTheNewestCommittedCheckpointIsLostWhenTheAnswerDoesNotCome) {
  std::vector<nlohmann::json> events = {
      LedgerEv("a", 0, "agent-start"),
      LedgerEv("a", 1, "lease"),
      LedgerEv("a", 2, "start"),
      LedgerEv("a", 30, "snapshot", {{"step", 100}, {"checkpoint_time", LedgerAt(28)}}),
      LedgerEv("a", 50, "notice"),
      LedgerEv("a", 50, "checkpoint-request", {{"signal", false}}),
      LedgerEv("a", 55, "checkpoint-answer", {{"answered", false}}),
      LedgerEv("a", 56, "trainer-stop"),
      LedgerEv("a", 57, "exit", {{"code", 75}, {"reason", "notice"}}),
      LedgerEv("b", 60, "agent-start"),
      LedgerEv("b", 61, "lease"),
      LedgerEv("b", 61, "restore-start"),
      LedgerEv("b", 64, "restore"),
      LedgerEv("b", 65, "start"),
      LedgerEv("b", 70, "exit", {{"code", 143}, {"reason", "signal"}}),
  };
  const Goodput g = ComputeGoodput(BuildLedger(events));
  ASSERT_EQ(g.attempts.size(), 2u);
  const CauseMs& a = g.attempts[0].ms;
  EXPECT_EQ(CauseSec(a, Cause::kProductive), 26);  // 2..28
  EXPECT_EQ(CauseSec(a, Cause::kLostWork), 22);    // 28..50
  EXPECT_EQ(CauseSec(a, Cause::kCheckpointAnswer), 5);
  EXPECT_EQ(CauseSec(a, Cause::kShutdown), 2);
  // b committed nothing and has no successor: its training is lost too.
  EXPECT_EQ(CauseSec(g.attempts[1].ms, Cause::kLostWork), 5);
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
    events.push_back(LedgerEv(id, node, "agent-start"));
    events.push_back(LedgerEv(id, 5, "lease"));
    events.push_back(LedgerEv(id, 6, "start", {{"node", node}}));
    events.push_back(LedgerEv(id, 40 + node, "exit", {{"reason", "complete"}}));
  }
  events.push_back(LedgerEv("n0", 20, "snapshot", {{"step", 10}}));
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
    EXPECT_EQ(CauseSec(a.ms, Cause::kLostWork), 0) << "a completed job keeps its work";
  }
  EXPECT_EQ(g.node_ms, spans);
}

// An answer that its attempt never committed (the final upload failed) has
// no answer-to-commit time: a later attempt's commit is not it.
// A group member that stays through two rounds in one attempt: each round is
// cut as one run, the wait between them is waiting, and the first round's
// work after the group snapshot the second resumed from is lost.
TEST(Goodput, AGroupMembersRoundsWithinOneAttemptAreCutOneByOne) {
  const std::vector<nlohmann::json> events = {
      LedgerEv("a", 0, "agent-start"),
      LedgerEv("a", 2, "group-joined", {{"round", 1}}),
      LedgerEv("a", 5, "trainer-start", {{"round", 1}}),
      LedgerEv("a", 30, "snapshot", {{"step", 100}, {"checkpoint_time", LedgerAt(28)}}),
      LedgerEv("a", 40, "round-end", {{"round", 1}}),
      LedgerEv("a", 100, "group-joined", {{"round", 2}}),
      LedgerEv("a", 101, "restore-start"),
      LedgerEv("a", 105, "restore-end"),
      LedgerEv("a", 106, "trainer-start", {{"round", 2}}),
      LedgerEv("a", 150, "snapshot", {{"step", 300}, {"checkpoint_time", LedgerAt(148)}}),
      LedgerEv("a", 160, "exit", {{"reason", "complete"}})};
  const Ledger ledger = BuildLedger(events);
  ASSERT_EQ(ledger.attempts.size(), 1u);
  ASSERT_EQ(ledger.attempts[0].rounds.size(), 2u);
  EXPECT_EQ(ledger.attempts[0].rounds[0].end, kLedgerT0 + 40'000);
  const Goodput g = ComputeGoodput(ledger);
  const CauseMs& ms = g.attempts[0].ms;
  EXPECT_EQ(CauseSec(ms, Cause::kWaiting), 2 + 60) << "the group forming, then between rounds";
  EXPECT_EQ(CauseSec(ms, Cause::kStartup), 3 + 1 + 1);
  EXPECT_EQ(CauseSec(ms, Cause::kRestore), 4);
  EXPECT_EQ(CauseSec(ms, Cause::kProductive), 23 + 54);
  EXPECT_EQ(CauseSec(ms, Cause::kLostWork), 12) << "round 1 after its step-100 checkpoint";
  int64_t sum = 0;
  for (int64_t c : ms) sum += c;
  EXPECT_EQ(sum, 160'000);
}

TEST(Goodput, AnAnswerNeverCommittedHasNoAnswerToCommitTime) {
  std::vector<nlohmann::json> events = {
      LedgerEv("a", 0, "agent-start"), LedgerEv("a", 1, "start"), LedgerEv("a", 10, "notice"),
      LedgerEv("a", 10, "checkpoint-request", {{"signal", true}}),
      LedgerEv("a", 12, "checkpoint-answer", {{"answered", true}, {"step", 50}}),
      LedgerEv("a", 20, "exit", {{"code", 74}, {"reason", "notice"}}),
      LedgerEv("b", 30, "agent-start"), LedgerEv("b", 31, "start"),
      LedgerEv("b", 40, "snapshot", {{"step", 60}}),
      LedgerEv("b", 41, "exit", {{"code", 0}, {"reason", "complete"}}),
  };
  const Goodput g = ComputeGoodput(BuildLedger(events));
  EXPECT_EQ(g.checkpoint.samples, 1);
  EXPECT_DOUBLE_EQ(g.checkpoint.mean_request_to_answer, 2.0);
  EXPECT_EQ(g.checkpoint.commit_samples, 0);
  EXPECT_DOUBLE_EQ(g.checkpoint.max_answer_to_commit, 0.0);
}

TEST(Goodput, AnEmptyLedgerHasNothing) {
  const Goodput g = ComputeGoodput(Ledger{});
  EXPECT_TRUE(g.attempts.empty());
  EXPECT_EQ(g.node_ms, 0);
  EXPECT_FALSE(g.mtbf_hours.has_value());
}

}  // namespace
}  // namespace sg::testing
