#include "common/log_queue.h"

#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace sg {

struct LogQueue::State {
  explicit State(Options o) : options(std::move(o)) {}

  const Options options;
  std::mutex mu;
  std::condition_variable changed;  // a line queued, written, or closed
  std::deque<std::string> lines;    // guarded by mu
  size_t bytes = 0;                 // queued plus being written
  bool writing = false;             // the thread is in options.write
  bool closed = false;
  uint64_t dropped = 0;     // ever
  uint64_t unreported = 0;  // since the last on_dropped
  uint64_t written = 0;     // lines the thread finished, for Drain

  bool Idle() const { return lines.empty() && !writing; }

  // The writer's thread: until closed and empty.
  void Run() {
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      changed.wait(lock, [&] { return closed || !lines.empty() || (unreported > 0); });
      if (!lines.empty()) {
        std::string line = std::move(lines.front());
        lines.pop_front();
        writing = true;
        lock.unlock();
        options.write(line);
        lock.lock();
        writing = false;
        bytes -= line.size();
        ++written;
        changed.notify_all();
        continue;
      }
      if (unreported > 0) {
        // Caught up: the count goes out once, through whatever the report
        // itself is logged to (this queue included).
        const uint64_t n = unreported;
        unreported = 0;
        if (options.on_dropped) {
          lock.unlock();
          options.on_dropped(n);
          lock.lock();
        }
        continue;
      }
      if (closed) return;
    }
  }
};

LogQueue::LogQueue(Options options) : state_(std::make_shared<State>(std::move(options))) {
  // Every signal blocked in the thread: the agent reads its signals from a
  // signalfd, and a thread that did not block one would take it.
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  std::thread([state = state_] { state->Run(); }).detach();
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

LogQueue::~LogQueue() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->closed = true;
  state_->changed.notify_all();
}

bool LogQueue::Push(std::string_view line, WhenFull when_full) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.Idle() && s.options.write_now) {
    const size_t n = s.options.write_now(line);
    if (n >= line.size()) return true;
    if (n > 0) when_full = WhenFull::kDrop;  // its head is out: it cannot be offered again
    line.remove_prefix(n);
  }
  if (when_full == WhenFull::kRefuse) {
    // An empty queue takes any line: one never refused for good.
    if (s.bytes > 0 && s.bytes + line.size() > s.options.max_bytes / 2) return false;
  } else if (s.bytes + line.size() > s.options.max_bytes) {
    ++s.dropped;
    ++s.unreported;
    s.changed.notify_all();
    return false;
  }
  s.lines.emplace_back(line);
  s.bytes += line.size();
  s.changed.notify_all();
  return true;
}

bool LogQueue::Drain(std::chrono::milliseconds stall) {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  while (!s.Idle()) {
    const uint64_t before = s.written;
    if (!s.changed.wait_for(lock, stall, [&] { return s.Idle() || s.written != before; })) {
      return false;
    }
  }
  return true;
}

uint64_t LogQueue::dropped() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->dropped;
}

size_t LogQueue::queued_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->bytes;
}

void WriteLineToFd(int fd, std::string_view line) {
  while (!line.empty()) {
    const ssize_t n = ::write(fd, line.data(), line.size());
    if (n > 0) {
      line.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      (void)::poll(&p, 1, -1);
    } else if (!(n < 0 && errno == EINTR)) {
      return;
    }
  }
}

size_t WriteLineToFdNow(int fd, std::string_view line) {
  if (line.size() > PIPE_BUF) return 0;
  pollfd p{fd, POLLOUT, 0};
  if (::poll(&p, 1, 0) != 1) return 0;
  if ((p.revents & (POLLERR | POLLNVAL)) != 0) return line.size();
  if ((p.revents & POLLOUT) == 0) return 0;
  ssize_t n;
  do {
    n = ::write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EAGAIN ? 0 : line.size();
  return static_cast<size_t>(n);
}

}  // namespace sg
