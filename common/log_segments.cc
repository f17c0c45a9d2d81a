#include "common/log_segments.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

namespace sg {
namespace {

constexpr std::string_view kPrefix = "seg-";
constexpr std::string_view kSuffix = ".log";

std::optional<uint64_t> SeqOfName(std::string_view name) {
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  name.remove_suffix(kSuffix.size());
  if (name.empty() || name.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

}  // namespace

StatusOr<std::unique_ptr<LogSegments>> LogSegments::Open(LogSegmentOptions options) {
  if (options.max_segments < 2) return Status::InvalidArgument("max_segments must be at least 2");
  if (options.segment_bytes == 0) return Status::InvalidArgument("segment_bytes must be > 0");
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) return Status::IOError("creating the log directory " + options.dir + ": " + ec.message());
  std::unique_ptr<LogSegments> s(new LogSegments(std::move(options)));
  for (const auto& entry : std::filesystem::directory_iterator(s->options_.dir, ec)) {
    if (auto seq = SeqOfName(entry.path().filename().string())) {
      s->on_disk_.insert(*seq);
      s->seq_ = std::max(s->seq_, *seq + 1);
    }
  }
  if (ec)
    return Status::IOError("listing the log directory " + s->options_.dir + ": " + ec.message());
  if (s->seq_ == 0) s->seq_ = 1;
  std::lock_guard<std::mutex> lock(s->mu_);
  s->EnforceBoundLocked();
  return s;
}

LogSegments::~LogSegments() {
  if (fd_ >= 0) ::close(fd_);
}

std::string LogSegments::PathOf(uint64_t seq) const {
  char name[40];
  std::snprintf(name, sizeof name, "seg-%010llu.log", static_cast<unsigned long long>(seq));
  return options_.dir + "/" + name;
}

bool LogSegments::WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = options_.write ? options_.write(fd, data.data(), data.size())
                                     : ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void LogSegments::Append(std::string_view line) {
  std::string report;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_bytes_ > 0 && current_bytes_ + line.size() > options_.segment_bytes) SealLocked();
    int err = 0;
    if (fd_ < 0) {
      fd_ = ::open(PathOf(seq_).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
      if (fd_ < 0) {
        err = errno;
      } else {
        on_disk_.insert(seq_);
        EnforceBoundLocked();
      }
    }
    bool ok = fd_ >= 0 && WriteAll(fd_, line);
    if (fd_ >= 0 && !ok) err = errno;
    if (ok) {
      if (current_bytes_ == 0) current_first_time_ = std::string(line.substr(0, line.find(' ')));
      current_bytes_ += line.size();
      stats_.written_bytes += line.size();
      if (dropping_) {
        report = "log capture in " + options_.dir + " resumed; " +
                 std::to_string(stats_.dropped_lines) + " line(s), " +
                 std::to_string(stats_.dropped_bytes) + " bytes were dropped so far";
      }
      dropping_ = false;
    } else {
      // A partial write may have left part of the line: the file stays
      // line-oriented for readers, who skip what does not parse.
      stats_.dropped_bytes += line.size();
      stats_.dropped_lines += 1;
      if (!dropping_) {
        report = "writing the log in " + options_.dir + " failed (" + std::strerror(err) +
                 "); dropping lines until it works again (training and snapshots go on)";
      }
      dropping_ = true;
    }
  }
  if (!report.empty() && on_drop_) on_drop_(report);
}

void LogSegments::SealLocked() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (current_bytes_ > 0) {
    sealed_.push_back({seq_, PathOf(seq_), current_first_time_, current_bytes_});
    ++seq_;
  }
  current_bytes_ = 0;
  current_first_time_.clear();
}

void LogSegments::EnforceBoundLocked() {
  while (on_disk_.size() > static_cast<size_t>(options_.max_segments)) {
    const uint64_t oldest = *on_disk_.begin();
    if (oldest == seq_ && fd_ >= 0) break;  // never the current one
    on_disk_.erase(on_disk_.begin());
    (void)::unlink(PathOf(oldest).c_str());
    for (auto it = sealed_.begin(); it != sealed_.end(); ++it) {
      if (it->seq != oldest) continue;
      if (!shipped_.count(oldest)) ++stats_.unshipped_removed;
      sealed_.erase(it);
      break;
    }
    shipped_.erase(oldest);
  }
}

void LogSegments::Seal() {
  std::lock_guard<std::mutex> lock(mu_);
  SealLocked();
}

std::vector<SealedSegment> LogSegments::Unshipped() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SealedSegment> out;
  for (const SealedSegment& s : sealed_) {
    if (!shipped_.count(s.seq)) out.push_back(s);
  }
  return out;
}

void LogSegments::MarkShipped(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  shipped_.insert(seq);
}

std::string LogSegments::current_path() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_bytes_ > 0 ? PathOf(seq_) : "";
}

LogSegmentStats LogSegments::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace sg
