#include "agent/run/metrics_file.h"

#include "agent/ledger/goodput.h"
#include "agent/ledger/ledger.h"
#include "common/files.h"
#include "common/log.h"

namespace sg {
namespace {

// A label value: backslash, double quote and newline escaped.
std::string Label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void Metric(std::string& out, std::string_view name, std::string_view type, std::string_view help,
            const std::string& labels, double value) {
  out += Format("# HELP {} {}\n# TYPE {} {}\n{}{{{}}} {}\n", name, help, name, type, name, labels,
                value);
}

}  // namespace

std::string FormatMetrics(const MetricsSnapshot& m) {
  const std::string job = "job=\"" + Label(m.job) + "\"";
  std::string out;
  if (m.seconds_since_commit) {
    Metric(out, "spotguard_seconds_since_last_commit", "gauge",
           "Seconds since the last snapshot this agent committed.", job, *m.seconds_since_commit);
  }
  if (m.committed_step) {
    Metric(out, "spotguard_committed_step", "gauge", "Step of the newest committed snapshot.", job,
           static_cast<double>(*m.committed_step));
  }
  Metric(out, "spotguard_uploaded_bytes_total", "counter",
         "Bytes of snapshots uploaded (new frames).", job, static_cast<double>(m.bytes_uploaded));
  Metric(out, "spotguard_reused_bytes_total", "counter",
         "Bytes of snapshots referenced from earlier snapshots, not uploaded.", job,
         static_cast<double>(m.bytes_reused));
  if (m.notice_to_commit) {
    Metric(out, "spotguard_last_notice_to_commit_seconds", "gauge",
           "Seconds from the last interruption notice to its final commit.", job,
           *m.notice_to_commit);
  }
  Metric(out, "spotguard_interruptions_total", "counter", "Interruption notices seen.", job,
         m.interruptions);
  Metric(out, "spotguard_trainer_restarts_total", "counter", "Trainer restarts after a crash.",
         job, m.restarts);
  out += "# HELP spotguard_phase The agent's phase (1 for the current one).\n"
         "# TYPE spotguard_phase gauge\n";
  for (std::string_view p : kMetricPhases) {
    out += Format("spotguard_phase{{{},phase=\"{}\"}} {}\n", job, p, p == m.phase ? 1 : 0);
  }
  out += "# HELP spotguard_goodput_seconds_total Seconds of this attempt by cause "
         "(docs/operations.md).\n# TYPE spotguard_goodput_seconds_total counter\n";
  for (const auto& [cause, seconds] : m.goodput) {
    out += Format("spotguard_goodput_seconds_total{{{},cause=\"{}\"}} {}\n", job, cause, seconds);
  }
  return out;
}

MetricsFile::MetricsFile(std::string path, std::string job, std::string attempt_id)
    : path_(std::move(path)), job_(std::move(job)), attempt_id_(std::move(attempt_id)) {}

void MetricsFile::Observe(std::string_view kind, const nlohmann::ordered_json& details,
                          Clock::WallTime at) {
  if (path_.empty()) return;
  nlohmann::json e = details.is_object() ? nlohmann::json::parse(details.dump())
                                         : nlohmann::json::object();
  e["kind"] = kind;
  e["time"] = FormatUtc(at, /*millis=*/true);
  e["attempt_id"] = attempt_id_;
  events_.push_back(e);
  auto num = [&](const char* key) -> std::optional<double> {
    auto it = e.find(key);
    if (it == e.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  if (kind == "snapshot") {
    last_commit_ = at;
    if (auto step = num("step")) committed_step_ = static_cast<int64_t>(*step);
    uploaded_ += static_cast<uint64_t>(num("new_bytes").value_or(0));
    reused_ += static_cast<uint64_t>(num("reused_bytes").value_or(0));
  } else if (kind == "notice") {
    ++interruptions_;
  } else if (kind == "crash") {
    ++restarts_;
  } else if (kind == "stop") {
    if (auto n = num("notice_to_commit_seconds")) notice_to_commit_ = *n;
  }
}

MetricsSnapshot MetricsFile::Snapshot(Clock::WallTime now, std::string_view phase) const {
  MetricsSnapshot m;
  m.job = job_;
  m.phase = std::string(phase);
  if (last_commit_) {
    m.seconds_since_commit = std::chrono::duration<double>(now - *last_commit_).count();
  }
  m.committed_step = committed_step_;
  m.bytes_uploaded = uploaded_;
  m.bytes_reused = reused_;
  m.notice_to_commit = notice_to_commit_;
  m.interruptions = interruptions_;
  m.restarts = restarts_;
  // The attempt as if it ended now.
  std::vector<nlohmann::json> events = events_;
  events.push_back({{"kind", "tick"}, {"time", FormatUtc(now, true)}, {"attempt_id", attempt_id_}});
  const Ledger ledger = BuildLedger(events);
  const Goodput g = ComputeGoodput(ledger);
  for (size_t i = 0; i < kCauseCount; ++i) {
    m.goodput.emplace_back(CauseName(static_cast<Cause>(i)),
                           static_cast<double>(g.total[i]) / 1000.0);
  }
  return m;
}

void MetricsFile::Tick(Clock::WallTime now, std::string_view phase, bool force) {
  if (path_.empty()) return;
  if (!force && last_write_ && now - *last_write_ < kInterval) return;
  last_write_ = now;
  // WriteFileAtomic writes a temporary beside it and renames it over the
  // file: the collector never reads half a file.
  if (Status st = WriteFileAtomic(path_, FormatMetrics(Snapshot(now, phase))); !st.ok()) {
    if (!warned_) LogWarn("writing the metrics file {} failed: {}", path_, st.message());
    warned_ = true;
  }
}

}  // namespace sg
