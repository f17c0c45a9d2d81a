#include "agent/repo/progress.h"

#include <unistd.h>

#include <cstdio>

namespace sg {

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  }
  return buf;
}

ProgressLine::ProgressLine(std::string label, uint64_t total_bytes)
    : label_(std::move(label)),
      total_(total_bytes),
      enabled_(::isatty(STDOUT_FILENO) == 1 && ::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

ProgressLine::~ProgressLine() {
  if (drawn_) {
    Update(total_);
    std::fputc('\n', stderr);
  }
}

void ProgressLine::Update(uint64_t done) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total_ && now - last_draw_ < std::chrono::milliseconds(250)) return;
  last_draw_ = now;
  drawn_ = true;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
  std::string eta = "--";
  if (rate > 0 && total_ >= done) {
    eta = std::to_string(static_cast<long long>(static_cast<double>(total_ - done) / rate)) + "s";
  }
  std::fprintf(stderr, "\r%s  %s / %s  %s/s  ETA %s   ", label_.c_str(), HumanBytes(done).c_str(),
               HumanBytes(total_).c_str(), HumanBytes(static_cast<uint64_t>(rate)).c_str(),
               eta.c_str());
  std::fflush(stderr);
}

}  // namespace sg
