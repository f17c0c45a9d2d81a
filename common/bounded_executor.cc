#include "common/bounded_executor.h"

#include <algorithm>

namespace sg {

BoundedExecutor::BoundedExecutor(int threads, int capacity)
    : capacity_(std::max(1, capacity)), max_threads_(static_cast<size_t>(std::max(1, threads))) {}

BoundedExecutor::~BoundedExecutor() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return pending_ == 0; });
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : threads_) t.join();
}

Status BoundedExecutor::Submit(std::function<Status()> task) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return pending_ < capacity_ || !first_error_.ok(); });
  if (!first_error_.ok()) return first_error_;
  queue_.push_back(std::move(task));
  ++pending_;
  // A worker more only when the queued tasks outnumber the free ones.
  if (queue_.size() > idle_ && threads_.size() < max_threads_) {
    threads_.emplace_back([this] { Work(); });
  }
  changed_.notify_all();
  return Status::Ok();
}

Status BoundedExecutor::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return pending_ == 0; });
  return first_error_;
}

bool BoundedExecutor::failed() {
  std::lock_guard<std::mutex> lock(mu_);
  return !first_error_.ok();
}

int BoundedExecutor::started() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(threads_.size());
}

void BoundedExecutor::Work() {
  while (true) {
    std::function<Status()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++idle_;
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      --idle_;
      if (queue_.empty()) return;  // stopping
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    Status st = task();
    std::lock_guard<std::mutex> lock(mu_);
    if (!st.ok() && first_error_.ok()) first_error_ = std::move(st);
    --pending_;
    changed_.notify_all();
  }
}

}  // namespace sg
