// InterruptionMonitor with the real ImdsClient and CurlTransport against the
// IMDS simulator: tokens required, expired and refused, server errors, slow
// answers, garbage bodies, events arriving together, and the time from a
// notice to its event.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/run/interruption_monitor.h"
#include "common/clock.h"
#include "common/http.h"
#include "common/imds_client.h"
#include "tests/support/subprocess.h"

namespace sg {
namespace {

using Kind = InterruptionEvent::Kind;
using nlohmann::json;
using std::chrono::milliseconds;

// Adds X-Forwarded-For to every request, as a forwarding proxy would.
class ForwardingProxy final : public HttpTransport {
 public:
  explicit ForwardingProxy(HttpTransport& inner) : inner_(inner) {}
  StatusOr<HttpResponse> Send(const HttpRequest& request) override {
    HttpRequest forwarded = request;
    forwarded.headers.emplace_back("X-Forwarded-For", "10.1.2.3");
    return inner_.Send(forwarded);
  }

 private:
  HttpTransport& inner_;
};

class MonitorAgainstSimulator : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(sim_.endpoint().empty()); }

  ImdsClient::Options ClientOptions() {
    ImdsClient::Options o;
    o.endpoint = sim_.endpoint();
    return o;
  }
  InterruptionMonitor::Options MonitorOptions(milliseconds poll = milliseconds(2000)) {
    InterruptionMonitor::Options o;
    o.poll_interval = poll;
    o.warn = [this](std::string_view m) {
      std::lock_guard<std::mutex> lock(log_mu_);
      warnings_.emplace_back(m);
    };
    o.info = [this](std::string_view m) {
      std::lock_guard<std::mutex> lock(log_mu_);
      infos_.emplace_back(m);
    };
    return o;
  }
  // A client and monitor over the simulator with default options.
  InterruptionMonitor& Monitor() {
    if (!monitor_) {
      client_ = std::make_unique<ImdsClient>(transport_, SystemClock(), ClientOptions());
      monitor_ = std::make_unique<InterruptionMonitor>(*client_, SystemClock(), MonitorOptions());
    }
    return *monitor_;
  }
  json Requests() { return json::parse(sim_.Control("GET", "/_sim/requests")); }
  void Fault(const std::string& body) { sim_.Control("POST", "/_sim/fault", body); }
  // A notice at a fixed time, so that each call makes a distinct notice.
  std::string SetNotice(const std::string& action, std::chrono::seconds from_now) {
    std::string time = FormatUtc(SystemClock().Now() + from_now);
    sim_.Control("POST", "/_sim/spot-notice", json{{"action", action}, {"time", time}}.dump());
    return time;
  }
  std::string Joined(const std::vector<std::string>& lines) {
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
  }

  testing::ImdsSimulator sim_;
  CurlTransport transport_;
  std::unique_ptr<ImdsClient> client_;
  std::unique_ptr<InterruptionMonitor> monitor_;
  std::mutex log_mu_;
  std::vector<std::string> warnings_, infos_;
};

TEST_F(MonitorAgainstSimulator, EveryReadCarriesAValidTokenAndOneTokenServesManyPolls) {
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Monitor().PollOnce().empty());
  const json log = Requests();
  ASSERT_EQ(log.size(), 13u) << log.dump();
  EXPECT_EQ(log[0]["method"], "PUT");
  EXPECT_EQ(log[0]["status"], 200);
  for (size_t i = 1; i < log.size(); ++i) {
    EXPECT_EQ(log[i]["method"], "GET");
    EXPECT_EQ(log[i]["token"], "valid") << log[i].dump();
    EXPECT_NE(log[i]["status"], 401);
  }
  EXPECT_TRUE(warnings_.empty()) << Joined(warnings_);
}

TEST_F(MonitorAgainstSimulator, AtMostFourRequestsPerPollInSteadyState) {
  ASSERT_TRUE(Monitor().PollOnce().empty());  // takes the token
  sim_.Control("DELETE", "/_sim/requests");
  constexpr int kPolls = 25;
  for (int i = 0; i < kPolls; ++i) Monitor().PollOnce();
  int gets = 0, puts = 0;
  for (const auto& r : Requests()) (r["method"] == "PUT" ? puts : gets)++;
  std::printf("[ measured ] %d polls: %d GETs, %d token PUTs, %.2f requests per poll\n", kPolls,
              gets, puts, static_cast<double>(gets + puts) / kPolls);
  EXPECT_EQ(puts, 0);
  EXPECT_EQ(gets, 4 * kPolls);
}

TEST_F(MonitorAgainstSimulator, AnExpiredTokenIsReplacedAndTheNoticeStillArrives) {
  ASSERT_TRUE(Monitor().PollOnce().empty());
  const std::string time = SetNotice("terminate", std::chrono::seconds(120));
  sim_.Control("POST", "/_sim/expire-tokens");
  sim_.Control("DELETE", "/_sim/requests");
  auto events = Monitor().PollOnce();
  ASSERT_EQ(events.size(), 1u) << Joined(warnings_);
  EXPECT_EQ(events[0].action, "terminate");
  EXPECT_EQ(FormatUtc(*events[0].time), time);
  const json log = Requests();
  ASSERT_GE(log.size(), 3u) << log.dump();
  EXPECT_EQ(log[0]["status"], 401);
  EXPECT_EQ(log[0]["token"], "expired");
  EXPECT_EQ(log[1]["method"], "PUT");
  // The simulator reads the first token header: had the new token been added
  // beside the expired one, this would be another 401.
  EXPECT_EQ(log[2]["token"], "valid");
  EXPECT_EQ(log[2]["status"], 200);
  EXPECT_TRUE(warnings_.empty()) << Joined(warnings_);
}

TEST_F(MonitorAgainstSimulator, ATokenRenewedBeforeItExpiresNeverMeetsA401) {
  // The client renews once less than the margin is left, i.e. from 1 s after
  // the first token was asked for; the token is good for 10 s. The sleep is
  // a lower bound (a slow machine only sleeps longer, and the renewal is due
  // all the same), and a request would have to stall 9 s between the client's
  // check and the simulator to meet an expired token.
  auto options = ClientOptions();
  options.token_ttl = std::chrono::seconds(10);
  options.refresh_margin = std::chrono::seconds(9);
  ImdsClient client(transport_, SystemClock(), options);
  ASSERT_TRUE(client.Get("meta-data/instance-id").ok());
  std::this_thread::sleep_for(milliseconds(1200));  // inside the margin, before the expiry
  ASSERT_TRUE(client.Get("meta-data/instance-id").ok());
  int puts = 0;
  for (const auto& r : Requests()) {
    puts += r["method"] == "PUT";
    EXPECT_NE(r["status"], 401) << r.dump();
  }
  EXPECT_EQ(puts, 2);
}

TEST_F(MonitorAgainstSimulator, A401OnEveryReadIsReportedOnceAndOtherSourcesGoOn) {
  Fault(R"({"path": "/latest/meta-data/spot/", "status": 401, "count": -1})");
  sim_.Control("POST", "/_sim/rebalance", "{}");
  auto first = Monitor().PollOnce();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].kind, Kind::kRebalance);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Monitor().PollOnce().empty());
  ASSERT_EQ(warnings_.size(), 1u) << Joined(warnings_);
  EXPECT_NE(warnings_[0].find("meta-data/spot/instance-action: IMDS refused a fresh token"),
            std::string::npos)
      << warnings_[0];
  EXPECT_EQ(Monitor().health().consecutive_failed_polls, 4);
}

TEST_F(MonitorAgainstSimulator, ATokenRequestThroughAForwardingProxyIsRefusedWith403) {
  ForwardingProxy proxy(transport_);
  ImdsClient client(proxy, SystemClock(), ClientOptions());
  InterruptionMonitor monitor(client, SystemClock(), MonitorOptions());
  sim_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate"})");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(monitor.PollOnce().empty());
  ASSERT_EQ(warnings_.size(), 4u) << "once per source: " << Joined(warnings_);
  EXPECT_NE(warnings_[0].find("token request"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("HTTP 403"), std::string::npos) << warnings_[0];
  for (const auto& r : Requests()) {
    EXPECT_EQ(r["method"], "PUT") << "nothing is read without a token";
    EXPECT_EQ(r["status"], 403);
  }
  EXPECT_EQ(monitor.health().failed_polls, 3);
}

TEST_F(MonitorAgainstSimulator, ATokenTtlOutOfRangeIsRefusedWith400) {
  auto options = ClientOptions();
  options.token_ttl = std::chrono::seconds(21601);
  ImdsClient client(transport_, SystemClock(), options);
  InterruptionMonitor monitor(client, SystemClock(), MonitorOptions());
  EXPECT_TRUE(monitor.PollOnce().empty());
  ASSERT_FALSE(warnings_.empty());
  EXPECT_NE(warnings_[0].find("HTTP 400 (the token TTL was refused)"), std::string::npos)
      << warnings_[0];
  EXPECT_EQ(Requests()[0]["status"], 400);
}

TEST_F(MonitorAgainstSimulator, ServerErrorsAreCountedAndTheNoticeComesThroughAfterwards) {
  const std::string time = SetNotice("terminate", std::chrono::seconds(120));
  Fault(R"({"path": "/latest/meta-data/spot/instance-action", "status": 500, "count": 3})");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Monitor().PollOnce().empty()) << "a 500 is not a notice";
  ASSERT_EQ(warnings_.size(), 1u) << Joined(warnings_);
  EXPECT_NE(warnings_[0].find("answered HTTP 500"), std::string::npos) << warnings_[0];
  auto events = Monitor().PollOnce();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(FormatUtc(*events[0].time), time);
  ASSERT_EQ(infos_.size(), 1u);
  EXPECT_NE(infos_[0].find("readable again after 3 failed polls"), std::string::npos) << infos_[0];
}

TEST_F(MonitorAgainstSimulator, AnAnswerSlowerThanTheTimeoutIsRetriedWithinThePoll) {
  ASSERT_TRUE(Monitor().PollOnce().empty());
  SetNotice("stop", std::chrono::seconds(120));
  Fault(R"({"path": "/latest/meta-data/spot/instance-action", "delay_ms": 1500, "count": 1})");
  const auto start = std::chrono::steady_clock::now();
  auto events = Monitor().PollOnce();
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(events.size(), 1u) << Joined(warnings_);
  EXPECT_EQ(events[0].action, "stop");
  EXPECT_GE(took, milliseconds(1000)) << "the first try timed out after 1 s";  // a lower bound
  EXPECT_TRUE(warnings_.empty()) << Joined(warnings_);
  // The simulator logs the slow request once its answer is sent, 1.5 s after
  // it came in: wait for that entry rather than for a fixed time (the 30 s
  // only catches a hang).
  int delayed = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (delayed == 0 && std::chrono::steady_clock::now() < deadline) {
    for (const auto& r : Requests()) delayed += r["fault"] == "delay";
    if (delayed == 0) std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(delayed, 1);
}

TEST_F(MonitorAgainstSimulator, ASlowTokenAnswerIsRetriedToo) {
  Fault(R"({"path": "/latest/api/token", "method": "PUT", "delay_ms": 1500, "count": 1})");
  sim_.Control("POST", "/_sim/rebalance", "{}");
  auto events = Monitor().PollOnce();
  ASSERT_EQ(events.size(), 1u) << Joined(warnings_);
  EXPECT_EQ(events[0].kind, Kind::kRebalance);
}

TEST_F(MonitorAgainstSimulator, GarbageIsLoggedOnceAndNeverTakenForANotice) {
  const std::string time = SetNotice("terminate", std::chrono::seconds(120));
  Fault(R"({"path": "/latest/meta-data/spot/instance-action", "garbage": true, "count": 2})");
  EXPECT_TRUE(Monitor().PollOnce().empty());
  EXPECT_TRUE(Monitor().PollOnce().empty());
  ASSERT_EQ(warnings_.size(), 1u) << Joined(warnings_);
  EXPECT_NE(warnings_[0].find("malformed body: not valid JSON"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("garbage"), std::string::npos) << warnings_[0];
  auto events = Monitor().PollOnce();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(FormatUtc(*events[0].time), time);
}

TEST_F(MonitorAgainstSimulator, TruncatedJsonWhereNoNoticeExistsIsAnErrorNotANotice) {
  // With no notice the simulator's garbage is the start of a JSON object, cut off.
  Fault(R"({"path": "/latest/meta-data/spot/instance-action", "garbage": true, "count": 1})");
  Fault(R"({"path": "/latest/meta-data/autoscaling/", "garbage": true, "count": 1})");
  EXPECT_TRUE(Monitor().PollOnce().empty());
  ASSERT_EQ(warnings_.size(), 2u) << Joined(warnings_);
  EXPECT_NE(warnings_[0].find("{\"action\": \"termin\\xff\\xfe\\x00"), std::string::npos)
      << warnings_[0];
  EXPECT_NE(warnings_[1].find("is not a lifecycle state"), std::string::npos) << warnings_[1];
  EXPECT_TRUE(Monitor().PollOnce().empty());
  EXPECT_EQ(infos_.size(), 2u) << "both readable again";
}

TEST_F(MonitorAgainstSimulator, ANoticeAndARebalanceArrivingTogetherAreBothReported) {
  sim_.Control("POST", "/_sim/rebalance", "{}");
  SetNotice("terminate", std::chrono::seconds(120));
  auto events = Monitor().PollOnce();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, Kind::kNotice);
  EXPECT_EQ(events[1].kind, Kind::kRebalance);
  EXPECT_TRUE(Monitor().PollOnce().empty());
}

TEST_F(MonitorAgainstSimulator, AHibernateNoticeIsANotice) {
  sim_.Control("POST", "/_sim/spot-notice", R"({"action": "hibernate", "in_seconds": 0})");
  auto events = Monitor().PollOnce();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].action, "hibernate");
  EXPECT_TRUE(events[0].IsNotice());
}

TEST_F(MonitorAgainstSimulator, LifecycleTerminatedIsHandledLikeANotice) {
  EXPECT_TRUE(Monitor().PollOnce().empty()) << "InService";
  sim_.Control("POST", "/_sim/lifecycle", R"({"state": "Terminated"})");
  auto events = Monitor().PollOnce();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kLifecycle);
  EXPECT_EQ(events[0].action, "Terminated");
  EXPECT_TRUE(events[0].IsNotice());
}

TEST_F(MonitorAgainstSimulator, AScheduledEventIsReportedOnce) {
  const json posted = json::parse(
      sim_.Control("POST", "/_sim/scheduled-events", R"([{"Code": "instance-retirement"}])"));
  auto events = Monitor().PollOnce();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, Kind::kScheduled);
  EXPECT_EQ(events[0].action, "instance-retirement");
  EXPECT_EQ(events[0].event_id, posted["events"][0]["EventId"]);
  ASSERT_TRUE(events[0].time.has_value());
  EXPECT_EQ(*ParseImdsEventTime(posted["events"][0]["NotBefore"].get<std::string>()),
            *events[0].time);
  EXPECT_TRUE(Monitor().PollOnce().empty());
}

TEST_F(MonitorAgainstSimulator, ReadsTheInstanceIdentityAndLifeCycle) {
  ImdsClient client(transport_, SystemClock(), ClientOptions());
  sim_.Control("POST", "/_sim/identity",
               R"({"instance_id": "i-0fedcba987654321f", "az": "eu-central-1b",
                   "instance_type": "p5.48xlarge", "life_cycle": "on-demand"})");
  auto id = ReadInstanceIdentity(client);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->instance_id, "i-0fedcba987654321f");
  EXPECT_EQ(id->region, "eu-central-1");
  EXPECT_EQ(id->availability_zone, "eu-central-1b");
  EXPECT_EQ(id->instance_type, "p5.48xlarge");
  EXPECT_EQ(id->life_cycle, "on-demand");
}

// The number the issue asks for: from the moment a notice is set until the
// monitor hands out its event, over 20 notices at a 200 ms poll interval.
// The latencies are measured and printed, not asserted: on a loaded machine
// any wall-clock bound can be exceeded. What must hold, and is asserted, is
// counted in polls: a notice set before a poll starts is handed out by that
// poll, so it comes at the latest with the second poll after it was set (the
// first may have read instance-action before the notice existed). With no
// stalls that is within the poll interval plus one poll's duration.
TEST_F(MonitorAgainstSimulator, ANoticeIsHandedOutByTheNextPollAndItsLatencyIsMeasured) {
  constexpr milliseconds kPoll(200);
  constexpr int kNotices = 20;
  ImdsClient client(transport_, SystemClock(), ClientOptions());
  InterruptionMonitor monitor(client, SystemClock(), MonitorOptions(kPoll));
  std::mutex mu;
  std::condition_variable cv;
  struct Seen {
    InterruptionEvent event;
    std::chrono::steady_clock::time_point at;
    int poll;  // 1 for the first poll
  };
  std::vector<Seen> seen;
  int polls = 0;
  std::atomic<bool> stop{false};
  std::thread poller([&] {
    monitor.Run(
        [&](std::vector<InterruptionEvent>& events) {
          const auto now = std::chrono::steady_clock::now();
          std::lock_guard<std::mutex> lock(mu);
          ++polls;
          for (auto& e : events) seen.push_back({e, now, polls});
          cv.notify_all();
          return true;
        },
        stop);
  });
  struct JoinOnExit {  // also when an assertion below returns early
    std::atomic<bool>& stop;
    std::thread& thread;
    ~JoinOnExit() {
      stop = true;
      thread.join();
    }
  } join_on_exit{stop, poller};

  std::vector<double> latencies_ms;
  for (int i = 0; i < kNotices; ++i) {
    // Spread the triggers over the phases of the poll cycle.
    std::this_thread::sleep_for(milliseconds((i * int64_t{53}) % kPoll.count()));
    const std::string time = FormatUtc(SystemClock().Now() + std::chrono::seconds(120 + i));
    const auto triggered = std::chrono::steady_clock::now();
    sim_.Control("POST", "/_sim/spot-notice", json{{"action", "terminate"}, {"time", time}}.dump());
    std::unique_lock<std::mutex> lock(mu);
    const int polls_when_set = polls;  // the notice exists: every poll from here on starts later
    // 30 s only catches a hang (the notice is due within two 200 ms polls).
    ASSERT_TRUE(
        cv.wait_for(lock, std::chrono::seconds(30), [&] { return seen.size() > size_t(i); }))
        << "notice " << i << " never became an event";
    ASSERT_EQ(seen.size(), size_t(i) + 1) << "one event per notice";
    EXPECT_EQ(FormatUtc(*seen[i].event.time), time);
    EXPECT_LE(seen[i].poll, polls_when_set + 2)
        << "notice " << i << " was set before poll " << polls_when_set + 2
        << " started, but that poll did not hand it out";
    latencies_ms.push_back(
        std::chrono::duration<double, std::milli>(seen[i].at - triggered).count());
    lock.unlock();
    sim_.Control("DELETE", "/_sim/spot-notice");
  }
  std::vector<double> sorted = latencies_ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = (sorted[kNotices / 2 - 1] + sorted[kNotices / 2]) / 2;
  std::printf("[ latency  ] %d notices, poll interval %lld ms: median %.1f ms, max %.1f ms\n",
              kNotices, static_cast<long long>(kPoll.count()), median, sorted.back());
  RecordProperty("median_ms", static_cast<int>(median));
  RecordProperty("max_ms", static_cast<int>(sorted.back()));
  EXPECT_TRUE(warnings_.empty()) << Joined(warnings_);
}

}  // namespace
}  // namespace sg
