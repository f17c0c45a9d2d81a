// A bounded, rotating set of log files in one directory (docs/design.md
// §13): lines are appended to the current segment "seg-<seq>.log"; at
// segment_bytes, or when sealed, the segment is closed and the next one
// begins. At most max_segments files are kept: the oldest goes first,
// shipped or not. A write that fails (a full disk) drops the line and
// counts it; nothing here ever blocks or fails its caller on account of
// the log disk.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sg {

struct LogSegmentOptions {
  std::string dir;                    // created when missing
  uint64_t segment_bytes = 8u << 20;  // a segment is sealed once it reaches this
  int max_segments = 8;               // files kept in `dir`, the current one included
  // The write(2) used for the files; tests put a full disk here.
  std::function<ssize_t(int fd, const char* data, size_t size)> write;
};

struct SealedSegment {
  uint64_t seq = 0;
  std::string path;
  std::string first_time;  // the time of its first line ("2026-...Z")
  uint64_t bytes = 0;
};

struct LogSegmentStats {
  uint64_t written_bytes = 0;
  uint64_t dropped_bytes = 0;  // lines a failed write lost
  uint64_t dropped_lines = 0;
  uint64_t unshipped_removed = 0;  // segments rotated away before they were shipped
};

class LogSegments {
 public:
  // Segments already in `dir` (an earlier run's) count towards the bound
  // but are never offered for shipping; numbering continues after them.
  static StatusOr<std::unique_ptr<LogSegments>> Open(LogSegmentOptions options);
  ~LogSegments();

  // Appends one line ("<time> <source> <text>\n", common/log_lines.h).
  // Thread-safe. A line that cannot be written is dropped and counted; the
  // first such loss (and the first after a recovery) is reported to
  // `on_drop` outside the lock, once.
  void Append(std::string_view line);
  // Closes the current segment when it holds anything, so it can be shipped.
  void Seal();
  // Sealed segments of this run not yet shipped, oldest first.
  std::vector<SealedSegment> Unshipped() const;
  void MarkShipped(uint64_t seq);
  // The current segment's file ("" before the first line).
  std::string current_path() const;
  LogSegmentStats stats() const;
  const std::string& dir() const { return options_.dir; }
  // Called (without the lock held) with a description of a loss.
  void set_on_drop(std::function<void(const std::string&)> on_drop) {
    on_drop_ = std::move(on_drop);
  }

 private:
  explicit LogSegments(LogSegmentOptions options) : options_(std::move(options)) {}
  std::string PathOf(uint64_t seq) const;
  void SealLocked();
  void EnforceBoundLocked();
  bool WriteAll(int fd, std::string_view data);

  LogSegmentOptions options_;
  std::function<void(const std::string&)> on_drop_;
  mutable std::mutex mu_;
  int fd_ = -1;
  uint64_t seq_ = 0;  // the current (or next) segment's
  uint64_t current_bytes_ = 0;
  std::string current_first_time_;
  std::vector<SealedSegment> sealed_;  // this run's, oldest first
  std::set<uint64_t> on_disk_;         // every segment file in dir, the current one included
  std::set<uint64_t> shipped_;
  bool dropping_ = false;  // the last write failed
  LogSegmentStats stats_;
};

}  // namespace sg
