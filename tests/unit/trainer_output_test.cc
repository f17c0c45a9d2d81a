// The trainer's output as the forwarder hands it to the log capture
// (docs/design.md §13), with a real child process: stdout and stderr told
// apart, a 100 MB line without a newline cut and the lines after it intact.
#include <gtest/gtest.h>
#include <signal.h>

#include <mutex>
#include <thread>
#include <tuple>

#include "agent/supervisor.h"
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
  auto trainer = TrainerProcess::Start(config, {{"PATH", "/usr/bin:/bin"}}, TrainerLaunch{},
                                       dir.Join("notice.json"), "",
                                       [&](TrainerStream s, std::string_view line, bool cut) {
                                         std::lock_guard<std::mutex> lock(captured.mu);
                                         captured.lines.emplace_back(s, std::string(line), cut);
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

}  // namespace
}  // namespace sg
