// Up to `threads` worker threads, each started only when a task finds no
// free one (a snapshot of one small file starts one, not files_in_flight),
// with at most `capacity` tasks queued or running: Submit blocks when that
// many are under way, which bounds memory
// when every task holds a buffer (parts in flight x part size). The first
// error any task returns is kept and refuses further Submits; tasks already
// queued still run (they may hold bookkeeping that must complete).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"

namespace sg {

class BoundedExecutor {
 public:
  BoundedExecutor(int threads, int capacity);
  ~BoundedExecutor();  // waits for running tasks
  BoundedExecutor(const BoundedExecutor&) = delete;
  BoundedExecutor& operator=(const BoundedExecutor&) = delete;

  // Queues `task`, waiting while `capacity` tasks are queued or running.
  // Returns the first error so far instead of queueing once a task failed.
  Status Submit(std::function<Status()> task);
  // Waits until every queued task has run; returns the first error.
  Status Wait();
  // True once a task has failed.
  bool failed();
  // How many worker threads were started.
  int started();

 private:
  void Work();

  const int capacity_;
  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::function<Status()>> queue_;
  int pending_ = 0;  // queued + running
  size_t idle_ = 0;  // workers waiting for a task
  bool stopping_ = false;
  Status first_error_;
  std::vector<std::thread> threads_;
};

}  // namespace sg
