// The opt-in metrics file (config `metrics_file`, docs/operations.md,
// "Metrics"): Prometheus text format for node_exporter's textfile
// collector, rewritten atomically (write, then rename) every few seconds by
// the agent's loop. The figures come from the events of this attempt, as
// the ledger reads them, and from the policy's phase.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"

namespace sg {

// What the file says; every time is seconds.
struct MetricsSnapshot {
  std::string job;
  std::string phase;  // one of kMetricPhases
  std::optional<double> seconds_since_commit;
  std::optional<int64_t> committed_step;
  uint64_t bytes_uploaded = 0, bytes_reused = 0;
  std::optional<double> notice_to_commit;
  int interruptions = 0, restarts = 0;
  std::vector<std::pair<std::string, double>> goodput;  // cause name, seconds
};

inline constexpr std::string_view kMetricPhases[] = {"lease",          "restore",  "training",
                                                     "final_snapshot", "stopping", "done"};

// The file's text. Pure.
std::string FormatMetrics(const MetricsSnapshot& m);

class MetricsFile {
 public:
  // `path` "": every call does nothing.
  MetricsFile(std::string path, std::string job, std::string attempt_id);

  // An event of this attempt, at the time it happened.
  void Observe(std::string_view kind, const nlohmann::ordered_json& details, Clock::WallTime at);
  // Bytes a group node's part uploaded and referenced (its `snapshot`
  // observations are the group snapshots it reads, which carry none).
  void AddBytes(uint64_t uploaded, uint64_t reused) {
    uploaded_ += uploaded;
    reused_ += reused;
  }
  // Rewrites the file when `interval` has passed since the last write, or
  // when `force`. A failure is logged once and tried again next time.
  void Tick(Clock::WallTime now, std::string_view phase, bool force = false);

  // The snapshot as of `now` (exposed for tests).
  MetricsSnapshot Snapshot(Clock::WallTime now, std::string_view phase) const;

  static constexpr std::chrono::seconds kInterval{5};

 private:
  const std::string path_, job_, attempt_id_;
  std::vector<nlohmann::json> events_;  // as stored, for the ledger
  std::optional<Clock::WallTime> last_commit_, last_write_;
  std::optional<int64_t> committed_step_;
  uint64_t uploaded_ = 0, reused_ = 0;
  std::optional<double> notice_to_commit_;
  int interruptions_ = 0, restarts_ = 0;
  bool warned_ = false;
};

}  // namespace sg
