// The real agent under systemd's Type=notify watchdog (docs/deploy.md,
// scripts/spotguard@.service), for a group of two nodes and for one node:
// the test binds the notify socket, gives WATCHDOG_USEC, and checks what
// systemd would: READY=1, then WATCHDOG=1 with no gap longer than
// WATCHDOG_USEC (else systemd aborts the agent), and STOPPING=1 with exit
// 75 after a notice. WATCHDOG_USEC is 20 s: a loop that pings at half of it
// may be held 10 s by a loaded machine and still pass, while an agent that
// never pings fails within the 45 s it is watched; nothing else is timed.
// The gaps are measured between the kernel's arrival times of the messages
// (NotifySocket), so the test's own threads being held back cannot widen one.
#include <signal.h>

#include "common/clock.h"
#include "tests/e2e/group_node_fixture.h"

namespace sg::testing {
namespace {

constexpr auto kWatchdog = 20s;
// How long the agents are watched training before the notice.
constexpr auto kObserved = 45s;

using Clock = std::chrono::system_clock;  // the messages' kernel timestamps

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A time as the agents' log lines show it, to find a gap in them.
std::string LogTime(Clock::time_point t) { return FormatUtc(t, true); }

// What systemd holds the agent to between READY=1 and `until`: READY=1 came
// before the first WATCHDOG=1, and from READY=1 on no stretch of
// WATCHDOG_USEC went without one.
::testing::AssertionResult KeptTheWatchdog(const NotifySocket& socket, Clock::time_point until) {
  std::optional<Clock::time_point> ready, last;
  int pings = 0;
  for (const NotifySocket::Message& m : socket.Messages()) {
    if (m.at > until) break;
    if (m.text == "READY=1" && !ready) {
      ready = last = m.at;
    } else if (m.text == "WATCHDOG=1") {
      if (!ready) return ::testing::AssertionFailure() << "WATCHDOG=1 before READY=1";
      if (m.at - *last > kWatchdog) {
        return ::testing::AssertionFailure()
               << "no WATCHDOG=1 for " << Seconds(m.at - *last) << " s after " << pings
               << " pings (from " << LogTime(*last)
               << "): systemd would have aborted the agent";
      }
      last = m.at;
      ++pings;
    }
  }
  if (!ready) return ::testing::AssertionFailure() << "no READY=1";
  if (until - *last > kWatchdog) {
    return ::testing::AssertionFailure() << "no WATCHDOG=1 in the last " << Seconds(until - *last)
                                         << " s (" << pings << " pings before)";
  }
  return ::testing::AssertionSuccess() << pings << " pings";
}

class NotifyE2E : public GroupNodeE2E {
 protected:
  NodeOptions UnderSystemd(const NotifySocket& socket) {
    NodeOptions o;
    o.env = {{"NOTIFY_SOCKET", socket.path()},
             {"WATCHDOG_USEC",
              std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(kWatchdog)
                                 .count())}};
    return o;
  }
};

TEST_F(NotifyE2E, AGroupOfTwoKeepsTheWatchdogAndANoticedNodeSaysStoppingAndExits75) {
  NotifySocket one(dir_.Join("notify-1.sock")), two(dir_.Join("notify-2.sock"));
  const std::string config = JobConfig(2, GroupTrainer());
  StartNode(1, config, UnderSystemd(one));
  StartNode(2, config, UnderSystemd(two));
  ASSERT_TRUE(one.WaitFor("READY=1", 120s)) << Logs();
  ASSERT_TRUE(two.WaitFor("READY=1", 120s)) << Logs();
  // READY=1 comes once the node's trainer runs in its first round.
  EXPECT_TRUE(nodes_[1].agent->WaitForOutput("round 1: rank", 60s)) << Logs();
  std::this_thread::sleep_for(kObserved);
  ASSERT_FALSE(nodes_[1].agent->Wait(0ms).has_value()) << Logs();
  ASSERT_FALSE(nodes_[2].agent->Wait(0ms).has_value()) << Logs();
  ASSERT_TRUE(WaitFor([&] { return !Groups().empty(); }, 60s)) << Logs();

  Notice(2);
  ASSERT_TRUE(two.WaitFor("STOPPING=1", 60s)) << Logs();
  const auto stopping = *two.First("STOPPING=1");
  EXPECT_EQ(nodes_[2].agent->Wait(150s), 75) << Logs();
  EXPECT_TRUE(KeptTheWatchdog(two, stopping)) << Logs();
  // The other node stays, waiting for the next round, and keeps the watchdog.
  ASSERT_TRUE(nodes_[1].agent->WaitForOutput("waiting for the next round", 60s)) << Logs();
  std::this_thread::sleep_for(kWatchdog);
  EXPECT_FALSE(one.First("STOPPING=1").has_value());
  EXPECT_TRUE(KeptTheWatchdog(one, Clock::now())) << Logs();
  ASSERT_EQ(::kill(nodes_[1].agent->pid(), SIGTERM), 0);
  EXPECT_TRUE(one.WaitFor("STOPPING=1", 30s)) << Logs();
  EXPECT_TRUE(nodes_[1].agent->Wait(60s).has_value()) << Logs();
}

TEST_F(NotifyE2E, OneNodeKeepsTheWatchdogAndANoticeSaysStoppingAndExits75) {
  NotifySocket socket(dir_.Join("notify.sock"));
  const std::string config = JobConfig(
      1,
      {SPOTGUARD_PYTHON, std::string(SPOTGUARD_SOURCE_DIR) + "/examples/simple_trainer.py", "--out",
       "{checkpoint_dir}", "--steps", "1000000", "--step-seconds", "0.05", "--checkpoint-every",
       "40"},
      {{"resume_args", {"--resume", "{resume}"}}});
  StartNode(1, config, UnderSystemd(socket));
  ASSERT_TRUE(socket.WaitFor("READY=1", 120s)) << Logs();
  std::this_thread::sleep_for(kObserved);
  ASSERT_FALSE(nodes_[1].agent->Wait(0ms).has_value()) << Logs();

  Notice(1);
  ASSERT_TRUE(socket.WaitFor("STOPPING=1", 60s)) << Logs();
  EXPECT_EQ(nodes_[1].agent->Wait(150s), 75) << Logs();
  EXPECT_TRUE(KeptTheWatchdog(socket, *socket.First("STOPPING=1"))) << Logs();
}

}  // namespace
}  // namespace sg::testing
