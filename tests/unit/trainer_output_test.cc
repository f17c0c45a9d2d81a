// The trainer's output as the forwarder hands it to the log capture
// (docs/design.md §13), with a real child process: stdout and stderr told
// apart, a 100 MB line without a newline cut and the lines after it intact.
#include <gtest/gtest.h>
#include <signal.h>

#include <mutex>
#include <thread>
#include <tuple>

#include "agent/trainer/supervisor.h"
#include "common/log_lines.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

using testing::TempDir;

struct Captured {
  std::mutex mu;
  std::vector<std::tuple<TrainerStream, std::string, bool>> lines;
  std::vector<std::pair<std::string, bool>> Of(TrainerStream stream) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::pair<std::string, bool>> out;
    for (const auto& [s, line, cut] : lines) {
      if (s == stream) out.emplace_back(line, cut);
    }
    return out;
  }
};

TEST(TrainerOutput, StreamsAreToldApartAndAHundredMegabyteLineIsCut) {
  TempDir dir;
  Config config;
  config.job = "job";
  config.checkpoint_dir = dir.path();
  config.stop_signal = SIGTERM;
  config.stop_grace = std::chrono::seconds(5);
  config.command = {"/bin/sh", "-c",
                    "echo first; head -c 100000000 /dev/zero | tr '\\000' x; echo; "
                    "echo oops >&2; echo after"};
  Captured captured;
  auto trainer = TrainerProcess::Start(
      config, {{"PATH", "/usr/bin:/bin"}}, TrainerLaunch{}, dir.Join("notice.json"), "",
      [&](TrainerStream s, std::string_view line, bool cut, bool /*may_wait*/) {
        std::lock_guard<std::mutex> lock(captured.mu);
        captured.lines.emplace_back(s, std::string(line), cut);
        return true;
      });
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  // The trainer ends once the forwarder has read all but the pipe's buffer;
  // destroying it forwards that rest. The bound only catches a hang.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::optional<ExitStatus> ended;
  while (!(ended = (*trainer)->Poll()) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(ended.has_value());
  EXPECT_TRUE(ended->success()) << ended->ToString();
  trainer->reset();
  const auto out = captured.Of(TrainerStream::kStdout);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], std::make_pair(std::string("first"), false));
  EXPECT_EQ(out[1].first, std::string(kMaxLogLineBytes, 'x'));
  EXPECT_TRUE(out[1].second);
  EXPECT_EQ(out[2], std::make_pair(std::string("after"), false));
  EXPECT_EQ(captured.Of(TrainerStream::kStderr),
            (std::vector<std::pair<std::string, bool>>{{"oops", false}}));
}

Config ShellTrainer(const TempDir& dir, const std::string& script) {
  Config config;
  config.job = "job";
  config.checkpoint_dir = dir.path();
  config.stop_signal = SIGTERM;
  config.stop_grace = std::chrono::seconds(5);
  config.command = {"/bin/sh", "-c", script};
  return config;
}

// A capture without room holds the forwarder back (the trainer's pipe then
// fills and its writes wait), and no line is lost or reordered.
TEST(TrainerOutput, ACaptureWithoutRoomHoldsTheForwarderBackAndLosesNoLine) {
  TempDir dir;
  const Config config =
      ShellTrainer(dir, "i=0; while [ $i -lt 3000 ]; do echo $i; i=$((i+1)); done");
  std::mutex mu;
  std::vector<std::string> lines;
  int refused = 0;
  auto trainer = TrainerProcess::Start(
      config, {{"PATH", "/usr/bin:/bin"}}, TrainerLaunch{}, dir.Join("notice.json"), "",
      [&](TrainerStream, std::string_view line, bool, bool may_wait) {
        std::lock_guard<std::mutex> lock(mu);
        if (may_wait && (refused++ % 3) != 2) return false;  // no room, twice in three
        lines.emplace_back(line);
        return true;
      });
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::optional<ExitStatus> ended;
  while (!(ended = (*trainer)->Poll()) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(ended.has_value());
  trainer->reset();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(lines.size(), 3000u);
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i], std::to_string(i));
  EXPECT_GE(refused, 1);
}

// A capture that never has room (a hung log disk) never keeps the agent
// waiting: destroying the trainer wakes the forwarder, which then drops.
TEST(TrainerOutput, AForwarderHeldBackByAStuckCaptureStillEndsWhenTheTrainerIsDestroyed) {
  TempDir dir;
  const Config config = ShellTrainer(dir, "while true; do echo line; done");
  std::mutex mu;
  int offered = 0;
  int dropped = 0;
  auto trainer = TrainerProcess::Start(config, {{"PATH", "/usr/bin:/bin"}}, TrainerLaunch{},
                                       dir.Join("notice.json"), "",
                                       [&](TrainerStream, std::string_view, bool, bool may_wait) {
                                         std::lock_guard<std::mutex> lock(mu);
                                         ++offered;
                                         if (may_wait) return false;
                                         ++dropped;
                                         return true;
                                       });
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  while (true) {  // until the forwarder has been turned away at least once
    {
      std::lock_guard<std::mutex> lock(mu);
      if (offered > 0) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  trainer->reset();  // returns: the forwarder stopped waiting for room
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_GE(dropped, 1);
}

}  // namespace
}  // namespace sg
