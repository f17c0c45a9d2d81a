// An agent whose stderr nobody reads (a stopped `cat` on a fifo, a stalled
// journal, a Docker log driver in blocking mode) still handles a notice:
// logging never waits for stderr (docs/design.md §13). The real binary, a
// chatty trainer, the Ceph gateway and the IMDS simulator.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

#include "common/process.h"
#include "tests/e2e/agent_e2e_fixture.h"

extern char** environ;

namespace sg::testing {
namespace {

// Every captured line under `log_dir` (the agent's own lines included).
std::string CapturedLines(const std::string& log_dir) {
  std::string all;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(log_dir, ec)) {
    auto text = ReadFileToString(e.path().string());
    if (text.ok()) all += *text;
  }
  return all;
}

// Whether a thread of `pid` is inside write(2) on its fd 2: with nobody
// reading the pipe, it stays there for good.
bool WritingToStderr(pid_t pid) {
  std::error_code ec;
  for (const auto& t :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    auto text = ReadFileToString(t.path().string() + "/syscall");
    if (text.ok() && text->starts_with("1 0x2 ")) return true;
  }
  return false;
}

TEST_F(AgentE2E, AStderrNobodyReadsDelaysNeitherTheNoticeNorTheFinalSnapshot) {
  const std::string log_dir = dir_.Join("logs");
  // A line every 2 ms from the trainer, and the agent logs at debug level.
  const std::string config = WriteConfig(
      "a", {"--steps", "10000000", "--step-seconds", "0.002", "--checkpoint-every", "500"},
      {{"log_dir", log_dir}});
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  UniqueFd reader(fds[0]), writer(fds[1]);
  // The smallest pipe (one page), so that it is full within a second.
  const int capacity = ::fcntl(writer.get(), F_SETPIPE_SZ, 4096);
  ASSERT_GT(capacity, 0);
  auto out = OpenFile(dir_.Join("a.out"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(out.ok());

  SpawnOptions spawn;
  spawn.argv = {
      SPOTGUARD_BIN,     "run",           "-c", config, "--checkpoint-dir", dir_.Join("ckpt"),
      "--imds-endpoint", imds_.endpoint()};
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) spawn.env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  spawn.env.erase("SPOTGUARD_CONFIG");
  spawn.env["AWS_ACCESS_KEY_ID"] = s3_.access_key;
  spawn.env["AWS_SECRET_ACCESS_KEY"] = s3_.secret_key;
  spawn.env["SPOTGUARD_LOG_LEVEL"] = "debug";
  spawn.stdout_fd = out->get();
  spawn.stderr_fd = writer.get();
  auto agent = ChildProcess::Spawn(spawn);
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  writer.reset();  // the agent holds the only write end; nobody ever reads

  // The pipe fills: the agent's stderr writer is stuck in write(2).
  ASSERT_TRUE(WaitFor([&] { return WritingToStderr(agent->pid()); }, 60s))
      << CapturedLines(log_dir);
  ASSERT_TRUE(WaitFor([&] { return !Committed().empty(); }, 60s)) << CapturedLines(log_dir);
  // The agent kept logging after that: a commit on a full pipe.
  ASSERT_TRUE(WaitFor(
      [&] { return CapturedLines(log_dir).find(" committed: checkpoint") != std::string::npos; },
      60s))
      << CapturedLines(log_dir);

  ASSERT_TRUE(WritingToStderr(agent->pid()));  // still stuck, for good
  imds_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 60})");
  auto ended = agent->Wait(90s);
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  ASSERT_TRUE(ended->has_value()) << "still running 90 s after the notice\n"
                                  << CapturedLines(log_dir);
  EXPECT_EQ((*ended)->ShellCode(), 75) << CapturedLines(log_dir);
  // The final snapshot was committed, with stderr blocked all along.
  const std::string captured = CapturedLines(log_dir);
  EXPECT_NE(captured.find(" committed in "), std::string::npos) << captured;
  EXPECT_NE(captured.find("from the notice; exiting 75"), std::string::npos) << captured;
}

}  // namespace
}  // namespace sg::testing
