// A bounded queue of log lines in front of a writer that may block: a pipe
// nobody reads, a stalled journal, a Docker log driver in blocking mode, a
// hung log disk. Whoever logs never waits for that writer (docs/design.md
// §13): a line that finds the queue full is dropped and counted, and once
// the writer has caught up the count is reported, once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

namespace sg {

class LogQueue {
 public:
  struct Options {
    // Bytes of lines waiting for the writer; past that, lines are dropped.
    size_t max_bytes = size_t{1} << 20;
    // Writes one line, on the queue's own thread; may block for ever.
    std::function<void(std::string_view line)> write;
    // Optional: writes (a head of) `line` at once if that cannot block and
    // returns how many bytes it wrote (0: it would block). Tried on the
    // pusher's thread when nothing is queued and the writer is idle, so a
    // destination that keeps up gets each line at once, in order.
    std::function<size_t(std::string_view line)> write_now;
    // Called on the queue's thread, with nothing queued, when lines were
    // dropped since the last call: `dropped` of them.
    std::function<void(uint64_t dropped)> on_dropped;
  };

  // Starts the writer's thread (with every signal blocked in it). The thread
  // is detached: a writer stuck for ever is never waited for.
  explicit LogQueue(Options options);
  // Lines still queued are written by the thread, which then ends; never
  // waits for it.
  ~LogQueue();
  LogQueue(const LogQueue&) = delete;
  LogQueue& operator=(const LogQueue&) = delete;

  enum class WhenFull {
    kDrop,  // the line is dropped and counted
    // Nothing is counted: the caller keeps the line, to offer it again.
    // Such a line finds no room past half of max_bytes, so that a caller
    // that waits (the trainer's output) never crowds out one that cannot
    // (the agent's own lines).
    kRefuse,
  };
  // Queues `line` (or writes it at once, see write_now). Never waits for the
  // writer. False when the queue had no room for it.
  bool Push(std::string_view line, WhenFull when_full = WhenFull::kDrop);

  // Waits until every line pushed before is written. False (and returns) once
  // the writer has finished no line for `stall`: it is stuck.
  bool Drain(std::chrono::milliseconds stall);

  // Lines dropped so far, reported or not.
  uint64_t dropped() const;
  // Bytes waiting for the writer (the line being written included).
  size_t queued_bytes() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// For a queue in front of a file descriptor (stderr): a line written whole,
// retrying EINTR and waiting for room on EAGAIN; given up on other errors (a
// closed descriptor has nobody to tell).
void WriteLineToFd(int fd, std::string_view line);
// The write_now of such a queue: writes a line of at most PIPE_BUF bytes
// when poll(2) says the descriptor has room (then a pipe or a socket takes it
// without blocking); 0 otherwise. A descriptor that is closed or whose
// reader is gone takes the line (it is lost, as a blocking write would lose
// it).
size_t WriteLineToFdNow(int fd, std::string_view line);

// The process's stderr (common/log.cc): every logger writes through one
// LogQueue of kStderrQueueBytes, so logging never waits for whoever reads
// stderr (a stopped reader, a stalled journal, a full pipe). Past that,
// lines are dropped and counted, and "N log lines dropped: stderr was
// blocked" is logged once the queue has drained.
inline constexpr size_t kStderrQueueBytes = size_t{1} << 20;
// Waits until the lines logged so far reached stderr; gives up (false) once
// stderr has taken no line for `stall`. For the end of the process.
bool FlushStderr(std::chrono::milliseconds stall = std::chrono::seconds(2));

}  // namespace sg
