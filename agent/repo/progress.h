// A progress line for long transfers, shown on stderr only when stdout is a
// terminal: "restore  412.0 MiB / 1.0 GiB  183.2 MiB/s  ETA 3s".
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace sg {

class ProgressLine {
 public:
  // Enabled when stdout is a terminal, unless `force` says otherwise.
  ProgressLine(std::string label, uint64_t total_bytes);
  ~ProgressLine();  // ends the line
  void Update(uint64_t done_bytes);
  bool enabled() const { return enabled_; }

 private:
  const std::string label_;
  const uint64_t total_;
  const bool enabled_;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
  bool drawn_ = false;
};

// "1.5 GiB", "12.0 MiB", "512 B".
std::string HumanBytes(uint64_t bytes);

}  // namespace sg
