// Parallel work whose results must be consumed in order: tasks run on a
// BoundedExecutor, and `sink` receives their results strictly in the order
// the tasks were submitted. At most `window` results are in flight or
// waiting for the sink, which bounds memory when each holds a buffer
// (compressing frames, decoding ranges).
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>

#include "common/bounded_executor.h"
#include "common/status.h"

namespace sg {

template <typename T>
class OrderedPipeline {
 public:
  OrderedPipeline(BoundedExecutor& executor, size_t window, std::function<Status(T)> sink)
      : executor_(executor), window_(window == 0 ? 1 : window), sink_(std::move(sink)) {}
  ~OrderedPipeline() { (void)Finish(); }

  // Blocks while `window` results are outstanding. Returns the first error of
  // a task or of the sink instead of running more work.
  Status Submit(std::function<StatusOr<T>()> task) {
    const size_t index = submitted_++;
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [&] { return index < next_ + window_ || !error_.ok(); });
      if (!error_.ok()) return error_;
      ++outstanding_;
    }
    Status st = executor_.Submit([this, index, task = std::move(task)]() -> Status {
      StatusOr<T> result = task();
      std::lock_guard<std::mutex> lock(mu_);
      if (!result.ok()) {
        if (error_.ok()) error_ = result.status();
      } else {
        done_.emplace(index, std::move(result).value());
        // Whoever completes the result the sink waits for drains everything now in order.
        while (error_.ok() && !done_.empty() && done_.begin()->first == next_) {
          Status s = sink_(std::move(done_.begin()->second));
          done_.erase(done_.begin());
          ++next_;
          if (!s.ok()) error_ = s;
        }
      }
      --outstanding_;
      changed_.notify_all();
      // Errors are the pipeline's to report; the executor may be shared.
      return Status::Ok();
    });
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      --outstanding_;
      if (error_.ok()) error_ = st;
      changed_.notify_all();
      return st;
    }
    return Status::Ok();
  }

  // Waits for every submitted task; returns the first error, if any.
  Status Finish() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return outstanding_ == 0; });
    return error_;
  }

 private:
  BoundedExecutor& executor_;
  const size_t window_;
  std::function<Status(T)> sink_;
  size_t submitted_ = 0;  // only touched by the submitting thread
  std::mutex mu_;
  std::condition_variable changed_;
  size_t next_ = 0;         // index the sink needs next
  size_t outstanding_ = 0;  // submitted, not yet finished
  std::map<size_t, T> done_;
  Status error_;
};

}  // namespace sg
