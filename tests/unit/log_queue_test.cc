// The bounded queue in front of stderr and the log files (common/log_queue.h,
// docs/design.md §13): whoever logs never waits for a writer that is stuck,
// lines past the bound are dropped and counted, and the count is reported
// once the writer has caught up.
#include "common/log_queue.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <vector>

namespace sg {
namespace {

// A writer that blocks until the test opens it, recording what it wrote.
class GatedWriter {
 public:
  void Write(std::string_view line) {
    std::unique_lock<std::mutex> lock(mu_);
    ++entered_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
    lines_.emplace_back(line);
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    changed_.notify_all();
  }
  void WaitEntered() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return entered_ > 0; });
  }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool open_ = false;
  int entered_ = 0;
  std::vector<std::string> lines_;
};

std::string Line(int i) {
  std::string s = "line " + std::to_string(i);
  s.resize(9, '.');
  return s + "\n";  // 10 bytes
}

TEST(LogQueue, AStuckWriterNeverBlocksAPushAndLinesPastTheBoundAreDroppedAndCounted) {
  GatedWriter writer;
  std::promise<uint64_t> reported;
  LogQueue queue(LogQueue::Options{
      .max_bytes = 100,
      .write = [&](std::string_view line) { writer.Write(line); },
      .write_now = nullptr,
      .on_dropped = [&](uint64_t n) { reported.set_value(n); },
  });
  // The writer is stuck (the gate is shut) from the first line on: 10 lines
  // of 10 bytes fill the queue, the line being written included.
  int accepted = 0;
  for (int i = 0; i < 25; ++i) accepted += queue.Push(Line(i)) ? 1 : 0;
  EXPECT_EQ(accepted, 10);
  EXPECT_EQ(queue.dropped(), 15u);
  EXPECT_EQ(queue.queued_bytes(), 100u);
  writer.WaitEntered();
  EXPECT_FALSE(queue.Drain(std::chrono::milliseconds(50)));  // stuck: Drain gives up

  writer.Open();
  // Once caught up, the count is reported, once.
  EXPECT_EQ(reported.get_future().get(), 15u);
  std::vector<std::string> expected;
  for (int i = 0; i < 10; ++i) expected.push_back(Line(i));
  EXPECT_EQ(writer.lines(), expected);  // the first lines, in order
  EXPECT_EQ(queue.queued_bytes(), 0u);
}

TEST(LogQueue, ARefusedLineIsNotCountedSoTheCallerCanOfferItAgain) {
  GatedWriter writer;
  LogQueue queue(LogQueue::Options{.max_bytes = 40,
                                   .write = [&](std::string_view line) { writer.Write(line); },
                                   .write_now = nullptr,
                                   .on_dropped = nullptr});
  EXPECT_TRUE(queue.Push(Line(0), LogQueue::WhenFull::kRefuse));
  EXPECT_TRUE(queue.Push(Line(1), LogQueue::WhenFull::kRefuse));
  EXPECT_FALSE(queue.Push(Line(2), LogQueue::WhenFull::kRefuse));  // past half the bound
  EXPECT_EQ(queue.dropped(), 0u);
  // The other half is kept for lines that cannot wait.
  EXPECT_TRUE(queue.Push(Line(3)));
  EXPECT_TRUE(queue.Push(Line(4)));
  EXPECT_FALSE(queue.Push(Line(5)));
  EXPECT_EQ(queue.dropped(), 1u);
  writer.Open();
  EXPECT_TRUE(queue.Drain(std::chrono::seconds(60)));
  EXPECT_TRUE(queue.Push(Line(2), LogQueue::WhenFull::kRefuse));
  EXPECT_TRUE(queue.Drain(std::chrono::seconds(60)));
  EXPECT_EQ(writer.lines(),
            (std::vector<std::string>{Line(0), Line(1), Line(3), Line(4), Line(2)}));
}

TEST(LogQueue, AWriterThatKeepsUpGetsEachLineAtOnceAndOrderIsKeptBehindAQueuedOne) {
  GatedWriter writer;
  std::vector<std::string> now;
  bool room = true;
  LogQueue queue(LogQueue::Options{
      .max_bytes = 100,
      .write = [&](std::string_view line) { writer.Write(line); },
      .write_now = [&](std::string_view line) -> size_t {
        if (!room) return 0;
        now.emplace_back(line);
        return line.size();
      },
      .on_dropped = nullptr,
  });
  EXPECT_TRUE(queue.Push(Line(0)));  // written at once, on this thread
  EXPECT_EQ(now, std::vector<std::string>{Line(0)});
  room = false;
  EXPECT_TRUE(queue.Push(Line(1)));  // would block: queued for the thread
  room = true;
  EXPECT_TRUE(queue.Push(Line(2)));  // behind line 1: queued too, never written ahead of it
  EXPECT_EQ(now, std::vector<std::string>{Line(0)});
  writer.Open();
  EXPECT_TRUE(queue.Drain(std::chrono::seconds(60)));
  EXPECT_EQ(writer.lines(), (std::vector<std::string>{Line(1), Line(2)}));
}

// The real thing: a pipe whose reader does not read, as stderr read by a
// stopped `cat`, a stalled journal or a full Docker log pipe.
TEST(LogQueue, APipeNobodyReadsNeverBlocksTheLoggerAndTheDropIsReportedOnceItIsRead) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  const int w = fds[1];
  LogQueue* self = nullptr;
  LogQueue queue(LogQueue::Options{
      .max_bytes = 64 << 10,
      .write = [w](std::string_view line) { WriteLineToFd(w, line); },
      .write_now = [w](std::string_view line) { return WriteLineToFdNow(w, line); },
      .on_dropped =
          [&self](uint64_t n) {
            self->Push(std::to_string(n) + " log lines dropped: stderr was blocked\n");
          },
  });
  self = &queue;
  // 8 MiB through a pipe of 64 KiB and a queue of 64 KiB: this returns
  // (nothing blocks), and most lines are dropped.
  const std::string payload(100, 'p');
  constexpr int kLines = 80'000;
  for (int i = 0; i < kLines; ++i) queue.Push(std::to_string(i) + " " + payload + "\n");
  const uint64_t dropped = queue.dropped();
  EXPECT_GT(dropped, 0u);
  EXPECT_LE(queue.queued_bytes(), size_t{64} << 10);

  // The reader wakes up: it gets whole lines in order, then the count.
  std::string text;
  char buf[65536];
  while (text.find("dropped") == std::string::npos) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    ASSERT_GT(n, 0);
    text.append(buf, static_cast<size_t>(n));
  }
  while (text.back() != '\n') {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    ASSERT_GT(n, 0);
    text.append(buf, static_cast<size_t>(n));
  }
  EXPECT_TRUE(text.ends_with(std::to_string(dropped) + " log lines dropped: stderr was blocked\n"))
      << text.substr(text.size() > 200 ? text.size() - 200 : 0);
  int64_t last = -1;
  size_t lines = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    const std::string line = text.substr(at, nl - at);
    at = nl + 1;
    if (line.find("dropped") != std::string::npos) break;
    const int64_t i = std::stoll(line.substr(0, line.find(' ')));
    EXPECT_GT(i, last);
    EXPECT_EQ(line.substr(line.find(' ') + 1), payload);
    last = i;
    ++lines;
  }
  EXPECT_EQ(lines + dropped, static_cast<size_t>(kLines));
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace sg
