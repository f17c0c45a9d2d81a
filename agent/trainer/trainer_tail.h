// The trainer's last output lines, kept for the record of a snapshot it
// could not resume from (agent/run/suspect.h). Lines arrive on the output
// forwarder's thread and are read on the agent's.
#pragma once

#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "agent/trainer/supervisor.h"

namespace sg {

class TrainerTail {
 public:
  static constexpr size_t kLines = 20;
  static constexpr size_t kLineBytes = 400;

  // A sink that keeps each line `next` (may be null) takes and passes it
  // on; a line `next` refuses for now is offered again, and kept then.
  TrainerOutputSink Wrap(TrainerOutputSink next) {
    return [this, next = std::move(next)](TrainerStream s, std::string_view line, bool cut,
                                          bool may_wait) {
      if (next && !next(s, line, cut, may_wait)) return false;
      Add(line);
      return true;
    };
  }
  void Add(std::string_view line) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(line.substr(0, kLineBytes));
    if (lines_.size() > kLines) lines_.pop_front();
  }
  std::vector<std::string> Lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return {lines_.begin(), lines_.end()};
  }

 private:
  mutable std::mutex mu_;
  std::deque<std::string> lines_;
};

}  // namespace sg
