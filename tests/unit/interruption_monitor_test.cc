// InterruptionMonitor over a scripted metadata service and a fake clock: what
// becomes an event, what is reported once, what is an error, and a whole
// notice sequence driven by Run without sleeping.
#include "agent/run/interruption_monitor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "tests/support/fake_clock.h"

namespace sg {
namespace {

using Kind = InterruptionEvent::Kind;
using std::chrono::seconds;

constexpr std::string_view kNotice = InterruptionMonitor::kNoticePath;
constexpr std::string_view kLifecycle = InterruptionMonitor::kLifecyclePath;
constexpr std::string_view kRebalance = InterruptionMonitor::kRebalancePath;
constexpr std::string_view kScheduled = InterruptionMonitor::kScheduledPath;

// Answers from a table; a path not in it is a 404.
class ScriptedMetadata final : public MetadataService {
 public:
  StatusOr<std::string> Get(std::string_view path) override {
    ++gets;
    auto it = answers.find(std::string(path));
    if (it == answers.end()) return Status::NotFound("404 " + std::string(path));
    return it->second;
  }
  void Set(std::string_view path, std::string body) {
    answers.insert_or_assign(std::string(path), StatusOr<std::string>(std::move(body)));
  }
  void Set(std::string_view path, Status error) {
    answers.insert_or_assign(std::string(path), StatusOr<std::string>(std::move(error)));
  }
  void Clear(std::string_view path) { answers.erase(std::string(path)); }

  std::map<std::string, StatusOr<std::string>> answers;
  int gets = 0;
};

class InterruptionMonitorTest : public ::testing::Test {
 protected:
  InterruptionMonitor::Options Options() {
    InterruptionMonitor::Options o;
    o.poll_interval = std::chrono::milliseconds(2000);
    o.error_report_interval = std::chrono::milliseconds(60'000);
    o.warn = [this](std::string_view m) { warnings_.emplace_back(m); };
    o.info = [this](std::string_view m) { infos_.emplace_back(m); };
    return o;
  }
  // A UTC time `from_now` after the fake clock's now, as IMDS writes it.
  std::string Utc(seconds from_now) { return FormatUtc(clock_.Now() + from_now); }
  std::string NoticeBody(const std::string& action, seconds from_now) {
    return R"({"action": ")" + action + R"(", "time": ")" + Utc(from_now) + R"("})";
  }

  ScriptedMetadata imds_;
  testing::FakeClock clock_;
  std::vector<std::string> warnings_, infos_;
};

TEST_F(InterruptionMonitorTest, NothingIsReportedWhileEverySourceIs404) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(monitor.PollOnce().empty());
  EXPECT_EQ(imds_.gets, 12) << "one GET per source and poll";
  EXPECT_TRUE(warnings_.empty());
  EXPECT_EQ(monitor.health().polls, 3);
  EXPECT_EQ(monitor.health().failed_polls, 0);
  ASSERT_TRUE(monitor.health().last_clean_poll.has_value());
}

TEST_F(InterruptionMonitorTest, ANoticeIsReportedOnceWithItsDeadline) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  const std::string body = NoticeBody("terminate", seconds(120));
  imds_.Set(kNotice, body);
  auto events = monitor.PollOnce();
  ASSERT_EQ(events.size(), 1u);
  const InterruptionEvent& e = events[0];
  EXPECT_EQ(e.kind, Kind::kNotice);
  EXPECT_EQ(e.action, "terminate");
  ASSERT_TRUE(e.time.has_value());
  EXPECT_EQ(*e.time, clock_.Now() + seconds(120));
  EXPECT_EQ(e.observed, clock_.Now());
  EXPECT_EQ(e.source, kNotice);
  EXPECT_EQ(e.raw, body);
  EXPECT_TRUE(e.IsNotice());
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(seconds(2));
    EXPECT_TRUE(monitor.PollOnce().empty()) << "the same notice is not reported again";
  }
}

TEST_F(InterruptionMonitorTest, StopAndHibernateAreNoticesToo) {
  for (const char* action : {"stop", "hibernate"}) {
    InterruptionMonitor monitor(imds_, clock_, Options());
    imds_.Set(kNotice, NoticeBody(action, seconds(0)));
    auto events = monitor.PollOnce();
    ASSERT_EQ(events.size(), 1u) << action;
    EXPECT_EQ(events[0].action, action);
    EXPECT_TRUE(events[0].IsNotice());
  }
}

TEST_F(InterruptionMonitorTest, ANoticeAndARebalanceArrivingTogetherAreBothReportedNoticeFirst) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  imds_.Set(kRebalance, R"({"noticeTime": ")" + Utc(seconds(-1)) + R"("})");
  imds_.Set(kNotice, NoticeBody("terminate", seconds(120)));
  auto events = monitor.PollOnce();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, Kind::kNotice);
  EXPECT_EQ(events[1].kind, Kind::kRebalance);
  EXPECT_EQ(events[1].action, "rebalance");
  EXPECT_EQ(*events[1].time, clock_.Now() - seconds(1));
  EXPECT_FALSE(events[1].IsNotice());
  EXPECT_TRUE(monitor.PollOnce().empty());
}

TEST_F(InterruptionMonitorTest, ANewNoticeAfterTheOldOneWentAwayIsReportedButTheOldOneIsNot) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  const std::string first = NoticeBody("stop", seconds(120));
  imds_.Set(kNotice, first);
  ASSERT_EQ(monitor.PollOnce().size(), 1u);
  imds_.Clear(kNotice);
  EXPECT_TRUE(monitor.PollOnce().empty());
  imds_.Set(kNotice, first);
  EXPECT_TRUE(monitor.PollOnce().empty()) << "the same notice again is no news";
  clock_.Advance(seconds(600));
  imds_.Set(kNotice, NoticeBody("stop", seconds(120)));
  EXPECT_EQ(monitor.PollOnce().size(), 1u);
}

TEST_F(InterruptionMonitorTest, LifecycleChangesAreReportedAndTerminatedIsANotice) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  imds_.Set(kLifecycle, "InService");
  EXPECT_TRUE(monitor.PollOnce().empty()) << "InService is the baseline";
  imds_.Set(kLifecycle, "Standby\n");
  auto standby = monitor.PollOnce();
  ASSERT_EQ(standby.size(), 1u);
  EXPECT_EQ(standby[0].kind, Kind::kLifecycle);
  EXPECT_EQ(standby[0].action, "Standby");
  EXPECT_FALSE(standby[0].IsNotice());
  imds_.Set(kLifecycle, "Terminated");
  auto terminated = monitor.PollOnce();
  ASSERT_EQ(terminated.size(), 1u);
  EXPECT_EQ(terminated[0].action, "Terminated");
  EXPECT_TRUE(terminated[0].IsNotice());
  EXPECT_FALSE(terminated[0].time.has_value());
  EXPECT_TRUE(monitor.PollOnce().empty());
  imds_.Clear(kLifecycle);  // 404 leaves the last state in place
  EXPECT_TRUE(monitor.PollOnce().empty());
  imds_.Set(kLifecycle, "Terminated");
  EXPECT_TRUE(monitor.PollOnce().empty());
  imds_.Set(kLifecycle, "Warmed:Terminated");
  auto warmed = monitor.PollOnce();
  ASSERT_EQ(warmed.size(), 1u);
  EXPECT_TRUE(warmed[0].IsNotice());
}

TEST_F(InterruptionMonitorTest, AStateOtherThanInServiceAtStartIsReported) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  imds_.Set(kLifecycle, "Terminated");
  auto events = monitor.PollOnce();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].IsNotice());
}

TEST_F(InterruptionMonitorTest, ScheduledEventsAreReportedOncePerEventIdAndFinishedOnesNever) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  imds_.Set(kScheduled, "[]");
  EXPECT_TRUE(monitor.PollOnce().empty());
  imds_.Set(kScheduled, R"([
    {"NotBefore": "21 Jan 2019 09:00:43 GMT", "Code": "system-reboot",
     "Description": "scheduled reboot", "EventId": "instance-event-0d59937288b749b32",
     "NotAfter": "21 Jan 2019 09:17:23 GMT", "State": "active"},
    {"NotBefore": "20 Jan 2019 09:00:43 GMT", "Code": "instance-stop",
     "Description": "[Completed] stop", "EventId": "instance-event-1", "State": "completed"},
    {"Code": "instance-retirement", "EventId": "instance-event-2", "State": "canceled"}])");
  auto events = monitor.PollOnce();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kScheduled);
  EXPECT_EQ(events[0].action, "system-reboot");
  EXPECT_EQ(events[0].event_id, "instance-event-0d59937288b749b32");
  EXPECT_EQ(FormatUtc(*events[0].time), "2019-01-21T09:00:43Z");
  EXPECT_FALSE(events[0].IsNotice());
  EXPECT_EQ(events[0].ToJson()["detail"]["NotAfter"], "21 Jan 2019 09:17:23 GMT");
  EXPECT_TRUE(monitor.PollOnce().empty());
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(InterruptionMonitorTest, AMalformedScheduledEntryDoesNotHideTheGoodOnes) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  imds_.Set(kScheduled, R"([{"Code": "system-reboot"},
    {"Code": "instance-reboot", "EventId": "instance-event-9", "NotBefore": "yesterday"},
    {"Code": "instance-stop", "EventId": "instance-event-3", "State": "active"}])");
  auto events = monitor.PollOnce();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event_id, "instance-event-3");
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("event 0: no \"EventId\" string"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("event 1: \"NotBefore\" is not a time"), std::string::npos)
      << warnings_[0];
}

TEST_F(InterruptionMonitorTest, MalformedBodiesAreLoggedOnceCountedAndNeverTakenForANotice) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  const char kGarbage[] = "{\"action\": \"termin\xff\xfe\x00garbage";
  imds_.Set(kNotice, std::string(kGarbage, sizeof kGarbage - 1));
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(monitor.PollOnce().empty());
    clock_.Advance(seconds(2));
  }
  ASSERT_EQ(warnings_.size(), 1u) << "logged once, not on every poll";
  EXPECT_NE(warnings_[0].find(std::string(kNotice)), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("not valid JSON"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("\\xff\\xfe\\x00garbage"), std::string::npos) << warnings_[0];
  EXPECT_EQ(monitor.health().failed_polls, 10);
  EXPECT_EQ(monitor.health().consecutive_failed_polls, 10);
  EXPECT_NE(monitor.health().last_error.find("not valid JSON"), std::string::npos);

  imds_.Set(kNotice, NoticeBody("terminate", seconds(100)));
  auto events = monitor.PollOnce();
  ASSERT_EQ(events.size(), 1u) << "polling went on and found the real notice";
  ASSERT_EQ(infos_.size(), 1u);
  EXPECT_NE(infos_[0].find("readable again after 10 failed polls over 20 s"), std::string::npos)
      << infos_[0];
  EXPECT_EQ(monitor.health().consecutive_failed_polls, 0);
  EXPECT_EQ(monitor.health().last_error, "");
}

TEST_F(InterruptionMonitorTest, EachMalformedBodySaysWhatWasWrong) {
  const std::string t = FormatUtc(clock_.Now());
  const std::vector<std::tuple<std::string_view, std::string, std::string>> cases = {
      {kNotice, R"({"action": "term)", "not valid JSON (it ends after 16 bytes)"},
      {kNotice, R"(["terminate"])", "not a JSON object"},
      {kNotice, R"({"time": ")" + t + R"("})", "no \"action\""},
      {kNotice, R"({"action": "explode", "time": ")" + t + R"("})",
       "\"action\" is \"explode\", expected terminate, stop or hibernate"},
      {kNotice, R"({"action": "stop"})", "no \"time\""},
      {kNotice, R"({"action": "stop", "time": 5})", "\"time\" is not a string: 5"},
      {kNotice, R"({"action": "stop", "time": "soon"})", "\"time\" is \"soon\", not a UTC time"},
      {kRebalance, R"({"noticeTime": "2026-11-22T08:22:00+02:00"})", "not a UTC time"},
      {kRebalance, "", "not valid JSON (it ends after 0 bytes)"},
      {kRebalance, "{\"noticeTime\": x}", "not valid JSON (error at byte 16 of 17)"},
      {kLifecycle, std::string("InSer\xff", 6), "\"InSer\\xff\" is not a lifecycle state"},
      {kScheduled, R"({"Code": "x"})", "not a JSON list"},
  };
  for (const auto& [path, body, expected] : cases) {
    warnings_.clear();
    ScriptedMetadata imds;
    imds.Set(path, body);
    InterruptionMonitor monitor(imds, clock_, Options());
    EXPECT_TRUE(monitor.PollOnce().empty()) << body;
    ASSERT_EQ(warnings_.size(), 1u) << body;
    EXPECT_NE(warnings_[0].find(expected), std::string::npos) << warnings_[0];
    EXPECT_NE(warnings_[0].find("malformed body"), std::string::npos) << warnings_[0];
  }
}

TEST_F(InterruptionMonitorTest, RepeatedErrorsAreRemindedWithACountAndRecoveryIsLogged) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  imds_.Set(kRebalance, Status::Unavailable("IMDS GET x answered HTTP 500"));
  for (int i = 0; i < 61; ++i) {  // 122 s of failures, every 2 s
    EXPECT_TRUE(monitor.PollOnce().empty());
    clock_.Advance(seconds(2));
  }
  ASSERT_EQ(warnings_.size(), 3u);  // the first, then one reminder a minute
  EXPECT_NE(warnings_[0].find("HTTP 500; polling continues every 2s"), std::string::npos)
      << warnings_[0];
  EXPECT_NE(warnings_[1].find("still failing: 31 polls in a row over 60 s"), std::string::npos)
      << warnings_[1];
  EXPECT_NE(warnings_[2].find("still failing: 61 polls in a row over 120 s"), std::string::npos)
      << warnings_[2];
  imds_.Set(kRebalance, std::string("this is not JSON"));
  EXPECT_TRUE(monitor.PollOnce().empty());
  ASSERT_EQ(warnings_.size(), 4u) << "a different kind of failure is said once";
  EXPECT_NE(warnings_[3].find("malformed body"), std::string::npos);
  imds_.Clear(kRebalance);
  EXPECT_TRUE(monitor.PollOnce().empty());
  ASSERT_EQ(infos_.size(), 1u);
  EXPECT_NE(infos_[0].find("readable again after 62 failed polls"), std::string::npos) << infos_[0];
}

TEST_F(InterruptionMonitorTest, AnErrorIsNeverTakenForTheEndOfANotice) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  const std::string body = NoticeBody("terminate", seconds(120));
  imds_.Set(kNotice, body);
  ASSERT_EQ(monitor.PollOnce().size(), 1u);
  imds_.Set(kNotice, Status::Unavailable("IMDS GET answered HTTP 503"));
  EXPECT_TRUE(monitor.PollOnce().empty());
  imds_.Set(kNotice, body);
  EXPECT_TRUE(monitor.PollOnce().empty()) << "still the same notice, not a new one";
}

TEST_F(InterruptionMonitorTest, WhenNothingAnswersTheOtherSourcesWaitForTheNextPoll) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  imds_.Set(kNotice, Status::Unavailable("no answer").WithReason(std::string(kImdsNoAnswer)));
  imds_.Set(kRebalance, R"({"noticeTime": ")" + Utc(seconds(0)) + R"("})");
  EXPECT_TRUE(monitor.PollOnce().empty());
  EXPECT_EQ(imds_.gets, 1) << "one unanswered request ends the poll";
  imds_.Clear(kNotice);
  EXPECT_EQ(monitor.PollOnce().size(), 1u);
}

TEST_F(InterruptionMonitorTest, AnHttpErrorOnOneSourceDoesNotHideTheOthers) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  imds_.Set(kNotice, Status::Unavailable("HTTP 500").WithReason(std::string(kImdsHttpError)));
  imds_.Set(kRebalance, R"({"noticeTime": ")" + Utc(seconds(0)) + R"("})");
  auto events = monitor.PollOnce();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kRebalance);
  EXPECT_EQ(imds_.gets, 4);
}

TEST_F(InterruptionMonitorTest, RunDrivesAWholeNoticeSequenceWithoutSleeping) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  const auto start = clock_.Monotonic();
  const auto real_start = std::chrono::steady_clock::now();
  std::atomic<bool> stop{false};
  int polls = 0;
  std::vector<InterruptionEvent> seen;
  monitor.Run(
      [&](std::vector<InterruptionEvent>& events) {
        ++polls;
        if (polls == 3) imds_.Set(kRebalance, R"({"noticeTime": ")" + Utc(seconds(0)) + R"("})");
        if (polls == 5) imds_.Set(kNotice, NoticeBody("terminate", seconds(120)));
        for (auto& e : events) seen.push_back(e);
        return seen.empty() || !seen.back().IsNotice();
      },
      stop);
  EXPECT_EQ(polls, 6);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].kind, Kind::kRebalance);
  EXPECT_EQ(seen[1].kind, Kind::kNotice);
  // Polls at 0, 2, 4, 6, 8 and 10 s: the notice set after the fifth is seen by the sixth.
  EXPECT_EQ(clock_.Monotonic() - start, seconds(10));
  // Set at 8 s for 120 s later, seen at 10 s.
  EXPECT_EQ(seen[1].ToJson()["seconds_left"], 118);
  // Only a real sleep could fail this: the 10 s of polls would take 10 s, and
  // six polls against fakes take milliseconds even on a loaded machine.
  EXPECT_LT(std::chrono::steady_clock::now() - real_start, seconds(5)) << "nothing really slept";
}

TEST_F(InterruptionMonitorTest, RunReturnsWhenTheStopFlagIsSet) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  std::atomic<bool> stop{false};
  int polls = 0;
  monitor.Run(
      [&](std::vector<InterruptionEvent>&) {
        if (++polls == 3) stop = true;
        return true;
      },
      stop);
  EXPECT_EQ(polls, 3);
}

TEST_F(InterruptionMonitorTest, EventJsonHasWhatHooksRelyOn) {
  InterruptionMonitor monitor(imds_, clock_, Options());
  imds_.Set(kNotice, NoticeBody("terminate", seconds(120)));
  auto events = monitor.PollOnce();
  ASSERT_EQ(events.size(), 1u);
  auto j = events[0].ToJson();
  EXPECT_EQ(j["kind"], "notice");
  EXPECT_EQ(j["action"], "terminate");
  EXPECT_EQ(j["time"], Utc(seconds(120)));
  EXPECT_EQ(j["notice"], true);
  EXPECT_EQ(j["seconds_left"], 120);
  EXPECT_EQ(j["observed"], FormatUtc(clock_.Now(), true));
  EXPECT_EQ(j["source"], "meta-data/spot/instance-action");
  EXPECT_EQ(j["detail"]["action"], "terminate");
  EXPECT_EQ(events[0].Describe(),
            "spot interruption notice: terminate at " + Utc(seconds(120)) + " (120 s left)");
}

TEST(ParseImdsEventTime, ReadsTheScheduledEventStyleAndRejectsOthers) {
  auto t = ParseImdsEventTime("21 Jan 2019 09:00:43 GMT");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(FormatUtc(*t), "2019-01-21T09:00:43Z");
  EXPECT_EQ(FormatUtc(*ParseImdsEventTime("1 Dec 2026 23:59:59 GMT")), "2026-12-01T23:59:59Z");
  for (const char* bad :
       {"", "21 Jan 2019 09:00:43", "21 Foo 2019 09:00:43 GMT", "32 Jan 2019 09:00:43 GMT",
        "21 Jan 2019 9:00 GMT", "2019-01-21T09:00:43Z", "21 Jan 2019 24:00:00 GMT"}) {
    EXPECT_FALSE(ParseImdsEventTime(bad).ok()) << bad;
  }
}

// A service that answers a moment late at start is no alarm: "cannot be
// seen" is said only once the notice source has failed for
// unseeable_after, and its recovery says that notices are seen again.
TEST_F(InterruptionMonitorTest, NoticesAreSaidUnseenOnlyAfterFailingForTheBoundAndSeenAgainAfter) {
  InterruptionMonitor::Options options = Options();
  options.unseeable_after = std::chrono::milliseconds(30'000);
  auto contains = [](const std::vector<std::string>& lines, std::string_view text) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(text) != std::string::npos; });
  };
  const Status no_answer =
      Status::Unavailable("IMDS PUT token: no answer").WithReason(std::string(kImdsNoAnswer));
  {
    InterruptionMonitor late(imds_, clock_, options);
    imds_.Set(kNotice, no_answer);
    for (int i = 0; i < 3; ++i) {  // 6 s late
      EXPECT_TRUE(late.PollOnce().empty());
      clock_.Advance(seconds(2));
    }
    imds_.Set(kNotice, NoticeBody("terminate", seconds(110)));
    ASSERT_EQ(late.PollOnce().size(), 1u) << "the same monitor reads the notice";
    EXPECT_FALSE(contains(warnings_, "cannot be seen")) << warnings_[0];
    EXPECT_FALSE(contains(infos_, "now reachable"));
  }
  warnings_.clear();
  infos_.clear();
  imds_.Clear(kNotice);
  InterruptionMonitor down(imds_, clock_, options);
  imds_.Set(kNotice, no_answer);
  for (int i = 0; i < 20; ++i) {  // 40 s
    EXPECT_TRUE(down.PollOnce().empty());
    clock_.Advance(seconds(2));
  }
  ASSERT_EQ(std::count_if(warnings_.begin(), warnings_.end(),
                          [](const std::string& w) {
                            return w.find("cannot be seen") != std::string::npos;
                          }),
            1)
      << "said once";
  EXPECT_TRUE(contains(warnings_, "not readable for 30 s")) << warnings_.back();
  imds_.Clear(kNotice);
  EXPECT_TRUE(down.PollOnce().empty());
  EXPECT_TRUE(contains(infos_, "now reachable and interruption notices are seen again"))
      << (infos_.empty() ? "" : infos_[0]);
}

}  // namespace
}  // namespace sg
