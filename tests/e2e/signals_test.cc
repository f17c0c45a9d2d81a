// Stray signals never end the job (docs/agent.md, "Signals"): SIGUSR1,
// SIGUSR2 and SIGHUP sent to the agent reach the trainer, the others that
// would end a process are ignored, SIGQUIT stops the job like SIGTERM, and a
// stderr whose reader went away makes the agent's writes fail, not the job.
// The spotguard binary with real trainers and a file:// store.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "tests/e2e/file_store_agent_fixture.h"

namespace sg::testing {
namespace {

// Appends the name of each of SIGUSR1, SIGUSR2 and SIGHUP it gets to
// argv[1]; exits 0 once argv[2] exists.
constexpr char kTrainer[] = R"(
import os, signal, sys, time
out, done = sys.argv[1], sys.argv[2]
def note(signo, frame):
    with open(out, "a") as f:
        f.write(signal.Signals(signo).name + "\n")
for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP):
    signal.signal(s, note)
open(out, "a").close()
while not os.path.exists(done):
    time.sleep(0.05)
print("the trainer is done", flush=True)
for i in range(200):
    print("line %d of the trainer's last words" % i, flush=True)
)";

class Signals : public FileStoreAgentTest {
 protected:
  std::string TrainerConfig() {
    const std::string script = dir_.WriteFile("trainer.py", kTrainer);
    return WriteConfig("a", {SPOTGUARD_PYTHON, script, received_, done_});
  }
  // Waits until the trainer has started and set up its handlers.
  bool TrainerReady() {
    return WaitFor([&] { return ::access(received_.c_str(), F_OK) == 0; }, 60s);
  }
  const std::string received_ = dir_.Join("received.txt");
  const std::string done_ = dir_.Join("done");
};

TEST_F(Signals, UsrAndHupAreForwardedToTheTrainerAndOtherStraySignalsIgnored) {
  auto a = StartAgent("a", TrainerConfig(), dir_.Join("ckpt"));
  ASSERT_TRUE(TrainerReady()) << a->Output();
  std::string expected;
  for (int signo : {SIGUSR1, SIGUSR2, SIGHUP}) {
    ASSERT_EQ(::kill(a->pid(), signo), 0);
    expected += std::string(signo == SIGUSR1 ? "SIGUSR1" : signo == SIGUSR2 ? "SIGUSR2" : "SIGHUP") +
                "\n";
    EXPECT_TRUE(WaitFor([&] { return Contents(received_) == expected; }, 30s))
        << Contents(received_) << "\n"
        << a->Output();
  }
  for (int signo : {SIGPIPE, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGPWR, SIGRTMIN + 3}) {
    ASSERT_EQ(::kill(a->pid(), signo), 0);
  }
  ASSERT_TRUE(a->WaitForOutput("received SIGPWR", 30s)) << a->Output();
  ASSERT_TRUE(a->WaitForOutput("received signal " + std::to_string(SIGRTMIN + 3), 30s))
      << a->Output();
  EXPECT_EQ(Contents(received_), expected) << "only the three are forwarded";
  EXPECT_TRUE(Alive(a->pid())) << a->Output();
  ASSERT_TRUE(WriteFileAtomic(done_, "").ok());
  const auto code = a->Wait(60s);
  ASSERT_TRUE(code.has_value()) << a->Output();
  EXPECT_EQ(*code, 0) << "the job completed\n" << a->Output();
}

TEST_F(Signals, SigquitStopsTheJobLikeSigterm) {
  auto a = StartAgent("a", TrainerConfig(), dir_.Join("ckpt"));
  ASSERT_TRUE(TrainerReady()) << a->Output();
  ASSERT_EQ(::kill(a->pid(), SIGQUIT), 0);
  const auto code = a->Wait(60s);
  ASSERT_TRUE(code.has_value()) << a->Output();
  EXPECT_EQ(*code, 75) << a->Output();
  EXPECT_NE(a->Output().find("received SIGQUIT"), std::string::npos) << a->Output();
}

// `spotguard run ... 2>&1 | head`: the reader of the agent's stderr exits
// while the job runs. Its writes then fail with EPIPE; the job completes.
TEST_F(Signals, AStderrWhoseReaderWentAwayDoesNotEndTheJob) {
  const std::string fifo = dir_.Join("stderr.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opened before the agent opens its end, which would wait for a reader.
  UniqueFd reader(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(reader.valid());
  AgentProcess a({"run", "-c", TrainerConfig(), "--checkpoint-dir", dir_.Join("ckpt")},
                 {{"SPOTGUARD_CONFIG", ""},
                  {"SPOTGUARD_LOG_LEVEL", "debug"},
                  {"AWS_EC2_METADATA_DISABLED", "true"},
                  {"STDERR_FIFO", fifo}},
                 dir_.Join("a.log"), {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>\"$STDERR_FIFO\""});
  ASSERT_TRUE(TrainerReady());
  // The agent's stderr is written by a thread of its own: waited for.
  pollfd readable{reader.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&readable, 1, 30'000), 1) << "the agent wrote nothing to its stderr";
  char buf[4096];
  EXPECT_GT(::read(reader.get(), buf, sizeof buf), 0) << "the agent wrote to its stderr";
  reader.reset();  // head exits
  ASSERT_TRUE(WriteFileAtomic(done_, "").ok());
  const auto code = a.Wait(60s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0) << "not 141 (SIGPIPE)";
}

}  // namespace
}  // namespace sg::testing
