// ChildProcess with real (short) children: argv without a shell, the given
// environment only, stdin data, process groups, waiting, stopping.
#include "common/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/files.h"
#include "common/orphan_reaper.h"
#include "common/proc_stat.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

using std::chrono::milliseconds;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ExitStatus RunToEnd(const SpawnOptions& options) {
  auto child = ChildProcess::Spawn(options);
  EXPECT_TRUE(child.ok()) << child.status().ToString();
  if (!child.ok()) return ExitStatus{.code = -1};
  auto ended = child->Wait(std::chrono::seconds(30));
  EXPECT_TRUE(ended.ok() && ended->has_value());
  return ended.ok() && ended->has_value() ? **ended : ExitStatus{.code = -1};
}

// The pid a child writes to `path`; -1 when none comes within 30 s (which
// only catches a hang).
pid_t AwaitPid(const std::string& path) {
  std::string text;
  for (int i = 0; i < 3000 && text.empty(); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    text = Slurp(path);
  }
  return text.empty() ? -1 : std::stoi(text);
}

// Whether `pid` still exists as a process that is not a zombie.
bool Alive(pid_t pid) {
  const std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

TEST(ChildProcess, RunsArgvDirectlyAndReportsTheExitCode) {
  SpawnOptions o;
  o.argv = {"false"};
  o.env = {{"PATH", "/usr/bin:/bin"}};
  ExitStatus s = RunToEnd(o);
  EXPECT_EQ(s.code, 1);
  EXPECT_FALSE(s.success());
  EXPECT_EQ(s.ToString(), "exit code 1");

  testing::TempDir dir;
  o.argv = {"/bin/sh", "-c", "printf '%s|' \"$@\" > \"$OUT\"", "sh", "a b", "$HOME", "*"};
  o.env["OUT"] = dir.Join("out");
  EXPECT_TRUE(RunToEnd(o).success());
  EXPECT_EQ(Slurp(dir.Join("out")), "a b|$HOME|*|") << "arguments reach the child untouched";
}

TEST(ChildProcess, TheChildSeesOnlyTheGivenEnvironmentAndTheStdinData) {
  testing::TempDir dir;
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "cat > \"$OUT\"; echo \"$FOO ${HOME:-no-home}\" >> \"$OUT\""};
  o.env = {{"OUT", dir.Join("out")}, {"FOO", "bar"}};
  o.stdin_data = "hello\n";
  EXPECT_TRUE(RunToEnd(o).success());
  EXPECT_EQ(Slurp(dir.Join("out")), "hello\nbar no-home\n");
}

TEST(ChildProcess, LargeStdinDataNeverBlocksTheParent) {
  testing::TempDir dir;
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 0.2; wc -c > \"$OUT\""};
  o.env = {{"OUT", dir.Join("out")}, {"PATH", "/usr/bin:/bin"}};
  o.stdin_data = std::string(4 << 20, 'x');  // far more than a pipe holds
  EXPECT_TRUE(RunToEnd(o).success());
  EXPECT_EQ(Slurp(dir.Join("out")), std::to_string(4 << 20) + "\n");
}

TEST(ChildProcess, WithoutStdinDataTheChildReadsEndOfFile) {
  testing::TempDir dir;
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "cat > \"$OUT\""};
  o.env = {{"OUT", dir.Join("out")}, {"PATH", "/usr/bin:/bin"}};
  EXPECT_TRUE(RunToEnd(o).success());
  EXPECT_EQ(Slurp(dir.Join("out")), "");
}

TEST(ChildProcess, StdoutCanGoToAnotherDescriptor) {
  testing::TempDir dir;
  auto fd = OpenFile(dir.Join("captured"), O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_TRUE(fd.ok());
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "echo to-stdout; echo to-stderr >&2"};
  o.stdout_fd = fd->get();
  o.stderr_fd = fd->get();
  EXPECT_TRUE(RunToEnd(o).success());
  EXPECT_EQ(Slurp(dir.Join("captured")), "to-stdout\nto-stderr\n");
}

TEST(ChildProcess, NoOtherDescriptorLeaksIntoTheChild) {
  testing::TempDir dir;
  const int leaky = ::open(dir.Join("leaky").c_str(), O_WRONLY | O_CREAT, 0644);  // no O_CLOEXEC
  ASSERT_GE(leaky, 3);
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "test -e /proc/$$/fd/" + std::to_string(leaky)};
  EXPECT_EQ(RunToEnd(o).code, 1) << "fd " << leaky << " is open in the child";
  ::close(leaky);
}

TEST(ChildProcess, TheChildLeadsItsOwnProcessGroup) {
  SpawnOptions o;
  o.argv = {"/bin/sleep", "30"};
  auto child = ChildProcess::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_EQ(::getpgid(child->pid()), child->pid());
  EXPECT_NE(::getpgid(child->pid()), ::getpgrp());
  auto still = child->Wait(milliseconds(0));
  ASSERT_TRUE(still.ok());
  EXPECT_FALSE(still->has_value());
  ASSERT_TRUE(child->SignalGroup(SIGTERM).ok());
  auto ended = child->Wait();
  ASSERT_TRUE(ended.ok() && ended->has_value());
  EXPECT_EQ((*ended)->signal, SIGTERM);
  EXPECT_EQ((*ended)->ShellCode(), 143);
  EXPECT_EQ((*ended)->ToString(), "killed by SIGTERM");
  EXPECT_FALSE(child->running());
  EXPECT_TRUE(child->SignalGroup(SIGTERM).Is(StatusCode::kNotFound));
}

TEST(ChildProcess, StopReachesGrandchildrenAndEscalatesToSigkill) {
  testing::TempDir dir;
  SpawnOptions o;
  // The shell and its background child both ignore SIGTERM.
  o.argv = {"/bin/sh", "-c", "trap '' TERM; sleep 30 & echo $! > \"$OUT\"; wait"};
  o.env = {{"OUT", dir.Join("pid")}, {"PATH", "/usr/bin:/bin"}};
  auto child = ChildProcess::Spawn(o);
  ASSERT_TRUE(child.ok());
  const pid_t gc = AwaitPid(dir.Join("pid"));
  ASSERT_GT(gc, 0);
  EXPECT_TRUE(Alive(gc));
  auto ended = child->Stop(milliseconds(200));
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  EXPECT_EQ(ended->signal, SIGKILL);
  // Reaped by init once the group's SIGKILL lands; up to 30 s only catches a hang.
  for (int i = 0; i < 3000 && Alive(gc); ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_FALSE(Alive(gc)) << "the grandchild got the group's SIGKILL";
}

TEST(ChildProcess, DestroyingARunningChildKillsAndReapsIt) {
  pid_t pid = -1;
  {
    SpawnOptions o;
    o.argv = {"/bin/sleep", "30"};
    auto child = ChildProcess::Spawn(o);
    ASSERT_TRUE(child.ok());
    pid = child->pid();
    ChildProcess moved = std::move(*child);
    EXPECT_FALSE(child->running());
    EXPECT_TRUE(moved.running());
  }
  EXPECT_NE(::kill(pid, 0), 0) << "killed and reaped, not a zombie";
}

TEST(ChildProcess, ACommandThatCannotStartIsAnError) {
  SpawnOptions o;
  o.argv = {"spotguard-no-such-command"};
  o.env = {{"PATH", "/usr/bin:/bin"}};
  auto missing = ChildProcess::Spawn(o);
  EXPECT_TRUE(missing.status().Is(StatusCode::kNotFound)) << missing.status().ToString();
  o.argv = {"/nonexistent/dir/cmd"};
  EXPECT_FALSE(ChildProcess::Spawn(o).ok());
  o.argv = {};
  EXPECT_TRUE(ChildProcess::Spawn(o).status().Is(StatusCode::kInvalidArgument));
}

// The trainer's spawn path (fork + execve with PR_SET_PDEATHSIG and a guard).
SpawnOptions DyingWithParent(std::vector<std::string> argv) {
  SpawnOptions o;
  o.argv = std::move(argv);
  o.env = {{"PATH", "/usr/bin:/bin"}};
  o.die_with_parent = true;
  return o;
}

TEST(ChildProcessDyingWithParent, RunsLikeAnyChildInItsOwnGroup) {
  testing::TempDir dir;
  SpawnOptions o =
      DyingWithParent({"/bin/sh", "-c", "cat > \"$OUT\"; echo \"$FOO\" >> \"$OUT\"; exit 3"});
  o.env["OUT"] = dir.Join("out");
  o.env["FOO"] = "bar";
  o.stdin_data = "hello\n";
  EXPECT_EQ(RunToEnd(o).code, 3);
  EXPECT_EQ(Slurp(dir.Join("out")), "hello\nbar\n");

  auto child = ChildProcess::Spawn(DyingWithParent({"/bin/sleep", "30"}));
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_EQ(::getpgid(child->pid()), child->pid());
  auto ended = child->Stop(milliseconds(5000));
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(ended->signal, SIGTERM);
}

TEST(ChildProcessDyingWithParent, WhatTheChildLeftInItsGroupIsStoppedWithGraceAfterItWasReaped) {
  // The leftover ignores SIGTERM; the guard keeps the group id ours after the
  // child was reaped, so EndGroup can still signal it, then SIGKILL it.
  testing::TempDir dir;
  SpawnOptions o = DyingWithParent(
      {"/bin/sh", "-c", "sh -c 'trap \"\" TERM; echo $$ > \"$OUT\"; exec sleep 30' & exit 0"});
  o.env["OUT"] = dir.Join("pid");
  auto child = ChildProcess::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  auto ended = child->Wait(milliseconds(30'000));
  ASSERT_TRUE(ended.ok() && ended->has_value());
  const pid_t leftover = AwaitPid(dir.Join("pid"));
  ASSERT_GT(leftover, 0);
  EXPECT_TRUE(Alive(leftover)) << "reaping the child leaves its group alone";
  EXPECT_EQ(child->GroupMembers(), std::vector<pid_t>{leftover});
  ASSERT_TRUE(child->SignalGroup(SIGTERM).ok());
  bool killed = false;
  auto end = child->EndGroup(std::chrono::steady_clock::now() + milliseconds(300), &killed);
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_EQ(end->code, 0) << "how the child itself ended";
  EXPECT_TRUE(killed);
  for (int i = 0; i < 3000 && Alive(leftover); ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_FALSE(Alive(leftover));
  EXPECT_TRUE(child->GroupMembers().empty());
  EXPECT_TRUE(child->SignalGroup(SIGTERM).Is(StatusCode::kNotFound)) << "the group id is not ours";
}

TEST(ChildProcessDyingWithParent, AnExecFailureIsAnErrorNotASilentExit127) {
  testing::TempDir dir;
  // Found and executable, but execve fails: not a binary or script (ENOEXEC
  // from the kernel, which execve does not retry through a shell), a directory.
  const std::string garbage = dir.WriteFile("garbage", std::string("\x7f\x01\x02\x03", 4));
  ASSERT_EQ(::chmod(garbage.c_str(), 0755), 0);
  auto r = ChildProcess::Spawn(DyingWithParent({garbage}));
  EXPECT_FALSE(r.ok()) << "exec of a non-executable file must fail Spawn";
  EXPECT_NE(r.status().message().find(garbage), std::string::npos) << r.status().ToString();
  r = ChildProcess::Spawn(DyingWithParent({dir.path()}));
  EXPECT_FALSE(r.ok()) << "exec of a directory must fail Spawn";
  r = ChildProcess::Spawn(DyingWithParent({"/nonexistent/dir/cmd"}));
  EXPECT_FALSE(r.ok());
}

// The parent to kill -9 in the test below is this test binary re-executed
// (fork alone would leave a copy of a threaded process that may not allocate):
// with SPOTGUARD_TEST_SPAWN_AND_WAIT=FILE set it spawns, before main, a shell
// that starts a grandchild in the shell's group, and once Spawn has returned
// puts both pids in FILE.
[[maybe_unused]] const bool kSpawnAndWaitHelper = [] {
  const char* out = std::getenv("SPOTGUARD_TEST_SPAWN_AND_WAIT");
  if (out == nullptr) return false;
  SpawnOptions o =
      DyingWithParent({"/bin/sh", "-c", "sleep 600 & echo $$ $! > \"$OUT.tmp\"; wait"});
  o.env["OUT"] = out;
  auto child = ChildProcess::Spawn(o);
  if (!child.ok()) ::_exit(1);
  // Published only now that Spawn has returned, i.e. the guard is in place.
  const std::string tmp = std::string(out) + ".tmp";
  while (::rename(tmp.c_str(), out) != 0) ::usleep(10'000);
  while (true) ::pause();
}();

TEST(ChildProcessDyingWithParent, TheChildAndItsGroupDieWhenTheParentIsKilled) {
  testing::TempDir dir;
  const std::string pids = dir.Join("pids");
  SpawnOptions helper;
  helper.argv = {"/proc/self/exe"};
  helper.env = {{"SPOTGUARD_TEST_SPAWN_AND_WAIT", pids}, {"ASAN_OPTIONS", "detect_leaks=0"}};
  auto parent_process = ChildProcess::Spawn(helper);
  ASSERT_TRUE(parent_process.ok()) << parent_process.status().ToString();
  const pid_t parent = parent_process->pid();
  std::string text;
  // The helper is this (sanitized) test binary starting again: up to 30 s, only
  // to catch a hang on a loaded machine.
  for (int i = 0; i < 3000 && text.empty(); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    text = Slurp(pids);
  }
  ASSERT_FALSE(text.empty()) << "the shell did not start";
  std::istringstream in(text);
  pid_t shell = 0, grandchild = 0;
  in >> shell >> grandchild;
  ASSERT_TRUE(Alive(shell));
  ASSERT_TRUE(Alive(grandchild));
  ASSERT_EQ(::kill(parent, SIGKILL), 0);
  auto ended = parent_process->Wait();
  ASSERT_TRUE(ended.ok() && ended->has_value());
  for (int i = 0; i < 3000 && (Alive(shell) || Alive(grandchild)); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_FALSE(Alive(shell)) << "the child outlived the parent";
  EXPECT_FALSE(Alive(grandchild)) << "a process in the child's group outlived the parent";
  ::kill(-shell, SIGKILL);
}

// PID 1 duties (docs/design.md §11): an ended child that no ChildProcess owns
// is reaped, while an owned one keeps its exit status for its owner. The
// owned child is the older one, so waitid names it first and the reaper must
// find the stray through /proc.
TEST(OrphanReaper, ReapsEndedChildrenNoOneOwnsAndLeavesAnOwnedChildToItsOwner) {
  SpawnOptions spawn;
  spawn.argv = {"/bin/sh", "-c", "exit 7"};
  auto owned = ChildProcess::Spawn(spawn);
  ASSERT_TRUE(owned.ok()) << owned.status().ToString();
  const pid_t stray = ::fork();
  ASSERT_GE(stray, 0);
  if (stray == 0) ::_exit(3);
  auto ended = [](pid_t pid) {
    auto st = ReadProcStat(pid);
    return st.ok() && st->state == 'Z';
  };
  for (int i = 0; i < 1000 && !(ended(stray) && ended(owned->pid())); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(ended(stray) && ended(owned->pid()));
  EXPECT_EQ(ReapOrphanedChildren(), 1);
  EXPECT_TRUE(ReadProcStat(stray).status().Is(StatusCode::kNotFound)) << "the stray was reaped";
  auto status = owned->Wait(std::chrono::milliseconds(0));
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_TRUE(status->has_value());
  EXPECT_EQ((*status)->code, 7);
  EXPECT_EQ(ReapOrphanedChildren(), 0);
}

}  // namespace
}  // namespace sg
