// Exits never hang (docs/design.md §11, docs/agent.md "How it ends"): on
// every exit path the trainer's whole process group gets stop_signal and,
// after stop_grace, SIGKILL, also when the trainer itself has already exited;
// and the agent never waits for a descendant's descriptors. The spotguard
// binary with real trainers and a file:// store.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>

#include "tests/e2e/file_store_agent_fixture.h"

namespace sg::testing {
namespace {

using Clock = std::chrono::steady_clock;

class Exits : public FileStoreAgentTest {
 protected:
  void TearDown() override {
    for (pid_t pid : pids_to_kill_) ::kill(pid, SIGKILL);
    FileStoreAgentTest::TearDown();
  }
  // The pid a trainer wrote to `file`, waited for up to 30 s.
  pid_t PidFrom(const std::string& file) {
    EXPECT_TRUE(WaitFor([&] { return ReadPidFile(file) > 0; }, 30s)) << file;
    return ReadPidFile(file);
  }
  std::vector<pid_t> pids_to_kill_;  // what a failing test (or setsid) leaves behind
};

// Seconds from `since` to now.
double SecondsSince(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

TEST_F(Exits, ATrainerThatCompletesLeavingAChildOnItsOutputEndsTheJobPromptly) {
  // The child holds the trainer's stdout for 90 s; it must not keep the agent.
  const std::string child_file = dir_.Join("child.pid");
  const auto config =
      WriteConfig("a", {"/bin/sh", "-c", "sleep 90 & echo $! > " + child_file + "; exit 0"});
  const auto start = Clock::now();
  auto a = StartAgent("a", config, dir_.Join("ckpt"));
  const auto exit_code = a->Wait(60s);
  ASSERT_TRUE(exit_code.has_value()) << a->Output();
  EXPECT_EQ(*exit_code, 0) << a->Output();
  EXPECT_LT(SecondsSince(start), 20) << "stop_grace is 2 s; the child sleeps 90 s\n" << a->Output();
  const pid_t child = ReadPidFile(child_file);
  ASSERT_GT(child, 0);
  pids_to_kill_.push_back(child);
  EXPECT_NE(a->Output().find("job job is complete"), std::string::npos) << a->Output();
  EXPECT_TRUE(WaitFor([&] { return !Alive(child); }, 10s)) << "the child outlived the agent";
}

TEST_F(Exits, AProcessThatLeftTheTrainersGroupCannotKeepTheAgentWaitingOnItsOutput) {
  // setsid: out of the group's reach (docs/agent.md), still holding stdout.
  const std::string escaped_file = dir_.Join("escaped.pid");
  const auto config = WriteConfig(
      "a", {"/bin/sh", "-c",
            "setsid sleep 90 & echo $! > " + escaped_file + "; echo last words; exit 0"});
  const auto start = Clock::now();
  auto a = StartAgent("a", config, dir_.Join("ckpt"));
  const pid_t escaped = PidFrom(escaped_file);
  pids_to_kill_.push_back(escaped);
  const auto exit_code = a->Wait(60s);
  ASSERT_TRUE(exit_code.has_value()) << a->Output();
  EXPECT_EQ(*exit_code, 0) << a->Output();
  EXPECT_LT(SecondsSince(start), 20) << "the escaped process sleeps 90 s\n" << a->Output();
  EXPECT_NE(a->Output().find("] last words"), std::string::npos)
      << "what the trainer wrote is still forwarded\n"
      << a->Output();
}

TEST_F(Exits, WhatAnExitedTrainerLeftInItsGroupGetsTheStopSignalAndStopGraceBeforeSigkill) {
  // The leftover needs a moment to shut down cleanly on SIGTERM: it must get
  // it, not an instant SIGKILL as its parent is reaped.
  const std::string ready = dir_.Join("ready");
  const std::string stopped = dir_.Join("stopped");
  const auto config = WriteConfig(
      "a",
      {"/bin/sh", "-c",
       "(trap 'sleep 0.5; echo clean > " + stopped + "; exit 0' TERM; touch " + ready +
           "; sleep 90 & wait) & while [ ! -e " + ready + " ]; do sleep 0.05; done; exit 0"},
      {{"stop_grace", "15s"}});
  const auto start = Clock::now();
  auto a = StartAgent("a", config, dir_.Join("ckpt"));
  const auto exit_code = a->Wait(60s);
  ASSERT_TRUE(exit_code.has_value()) << a->Output();
  EXPECT_EQ(*exit_code, 0) << a->Output();
  EXPECT_LT(SecondsSince(start), 30) << a->Output();
  EXPECT_EQ(Contents(stopped), "clean\n") << "the leftover handled SIGTERM\n" << a->Output();
  EXPECT_NE(a->Output().find("process(es) in its process group"), std::string::npos) << a->Output();
}

TEST_F(Exits, OnSigtermAGrandchildIgnoringTheStopSignalIsKilledAfterStopGrace) {
  const std::string gc_file = dir_.Join("grandchild.pid");
  const auto config = WriteConfig(
      "a",
      {"/bin/sh", "-c", "sh -c 'trap \"\" TERM; echo $$ > " + gc_file + "; exec sleep 300' & wait"},
      {{"stop_grace", "3s"}});
  auto a = StartAgent("a", config, dir_.Join("ckpt"));
  ASSERT_TRUE(a->WaitForOutput("started the trainer (pid ", 30s)) << a->Output();
  groups_to_kill_.push_back(TrainerPid(a->Output()));
  const pid_t grandchild = PidFrom(gc_file);
  ASSERT_GT(grandchild, 0);
  pids_to_kill_.push_back(grandchild);
  ASSERT_TRUE(Alive(grandchild));

  const auto stop = Clock::now();
  ASSERT_EQ(::kill(a->pid(), SIGTERM), 0);
  const auto exit_code = a->Wait(60s);
  ASSERT_TRUE(exit_code.has_value()) << a->Output();
  EXPECT_EQ(*exit_code, 75) << a->Output();
  // stop_grace (3 s) plus a margin that load cannot use up; the grandchild
  // would sleep 300 s.
  EXPECT_LT(SecondsSince(stop), 30) << a->Output();
  EXPECT_TRUE(WaitFor([&] { return !Alive(grandchild); }, 10s))
      << "the grandchild outlived the agent\n"
      << a->Output();
  EXPECT_NE(a->Output().find("did not end within 3s of SIGTERM; killed it with SIGKILL"),
            std::string::npos)
      << a->Output();
}

}  // namespace
}  // namespace sg::testing
