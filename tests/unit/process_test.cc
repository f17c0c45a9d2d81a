// ChildProcess with real (short) children: argv without a shell, the given
// environment only, stdin data, process groups, waiting, stopping.
#include "common/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "common/files.h"
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
  std::string grandchild;
  for (int i = 0; i < 500 && grandchild.empty(); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    grandchild = Slurp(dir.Join("pid"));
  }
  ASSERT_FALSE(grandchild.empty());
  const pid_t gc = std::stoi(grandchild);
  EXPECT_TRUE(Alive(gc));
  auto ended = child->Stop(milliseconds(200));
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  EXPECT_EQ(ended->signal, SIGKILL);
  for (int i = 0; i < 200 && Alive(gc); ++i) std::this_thread::sleep_for(milliseconds(10));
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

}  // namespace
}  // namespace sg
