// Watches the instance metadata service for signs that the instance is going
// away: the spot interruption notice, the rebalance recommendation, the Auto
// Scaling target lifecycle state and scheduled maintenance events. Turns
// what it reads into typed events, each reported once.
//
// An answer that cannot be read is never taken for "no notice": a failed or
// malformed read leaves the previous state in place, is logged once with what
// was wrong, and is counted until the source answers again.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/duration.h"
#include "common/imds_client.h"
#include "common/status.h"

namespace sg {

struct InterruptionEvent {
  enum class Kind {
    kNotice,     // spot/instance-action: the instance will be stopped, terminated or hibernated
    kRebalance,  // events/recommendations/rebalance: elevated risk of interruption
    kLifecycle,  // autoscaling/target-lifecycle-state changed
    kScheduled,  // events/maintenance/scheduled: a new scheduled event
  };

  Kind kind = Kind::kNotice;
  // kNotice: "terminate" | "stop" | "hibernate"; kLifecycle: the target state
  // ("Terminated", "Standby", ...); kScheduled: the event code
  // ("system-reboot", ...); kRebalance: "rebalance".
  std::string action;
  // kNotice: when the action happens (the deadline); kRebalance: when EC2
  // made the recommendation; kScheduled: the earliest start (NotBefore);
  // kLifecycle: none.
  std::optional<Clock::WallTime> time;
  Clock::WallTime observed{};  // when the monitor read it
  std::string source;    // the metadata path it came from, e.g. "meta-data/spot/instance-action"
  std::string raw;       // the body as read (for kScheduled: this event's JSON object)
  std::string event_id;  // kScheduled only

  // True when the instance is going away: a spot notice, or a target
  // lifecycle state of Terminated or Warmed:Terminated (an Auto Scaling
  // scale-in, rebalance or health replacement), which is handled like a notice.
  bool IsNotice() const;

  // {"kind", "action", "time", "observed", "notice", "seconds_left" (notices),
  //  "source", "detail" (the parsed body), "event_id" (scheduled)}
  nlohmann::ordered_json ToJson() const;
  // One line for people: "notice: terminate at 2026-11-22T08:22:00Z (118 s left)".
  std::string Describe() const;
};

std::string_view InterruptionKindName(InterruptionEvent::Kind kind);

class InterruptionMonitor {
 public:
  struct Options {
    Duration poll_interval{2000};
    // While a source keeps failing, a reminder with the count is logged this
    // often (the first failure and the recovery are always logged).
    Duration error_report_interval{60'000};
    // A notice source failing this long is said to leave notices unseen
    // (once), and its recovery that they are seen again: a service that
    // answers a moment late at start is no alarm (docs/interruptions.md).
    Duration unseeable_after{30'000};
    // Where failures and recoveries are reported; LogWarn/LogInfo when unset.
    std::function<void(std::string_view)> warn;
    std::function<void(std::string_view)> info;
  };

  // Sources in the order each poll reads them: the notice first.
  static constexpr std::string_view kNoticePath = "meta-data/spot/instance-action";
  static constexpr std::string_view kLifecyclePath = "meta-data/autoscaling/target-lifecycle-state";
  static constexpr std::string_view kRebalancePath = "meta-data/events/recommendations/rebalance";
  static constexpr std::string_view kScheduledPath = "meta-data/events/maintenance/scheduled";

  // `imds` and `clock` must outlive the monitor.
  InterruptionMonitor(MetadataService& imds, Clock& clock, Options options);

  // Reads every source once (one GET each in steady state) and returns the
  // events not reported before, notices first. Never blocks longer than the
  // metadata client's own timeouts and retries; when the service does not
  // answer at all, the remaining sources are skipped until the next poll.
  std::vector<InterruptionEvent> PollOnce();

  // Calls PollOnce every poll_interval (measured from the start of each poll)
  // and hands each poll's events, possibly none, to `on_poll`. Returns when
  // `on_poll` returns false or `stop` becomes true (checked at least every
  // 100 ms while waiting). Sleeps through the injected clock.
  using PollCallback = std::function<bool(std::vector<InterruptionEvent>& events)>;
  void Run(const PollCallback& on_poll, const std::atomic<bool>& stop);

  struct Health {
    int64_t polls = 0;
    int64_t failed_polls = 0;  // polls where at least one source failed
    int64_t consecutive_failed_polls = 0;
    std::optional<Clock::WallTime> last_clean_poll;  // every source answered readably
    std::string last_error;                          // "" when the last poll was clean
  };
  Health health() const { return health_; }

  const Options& options() const { return options_; }

 private:
  struct SourceState {
    int64_t consecutive_failures = 0;
    StatusCode failing_code = StatusCode::kOk;  // what the current run of failures is
    Clock::MonoTime failing_since{};
    Clock::MonoTime last_reminder{};
    bool said_unseeable = false;  // "cannot be seen" was logged for this run of failures
  };

  // What one source's answer (a body, or NotFound) produced: the new events
  // and, when part or all of the body could not be read, what was wrong.
  struct SourceResult {
    SourceResult() = default;
    SourceResult(Status p) : problem(std::move(p)) {}  // NOLINT(google-explicit-constructor)
    SourceResult(std::vector<InterruptionEvent> e)     // NOLINT(google-explicit-constructor)
        : events(std::move(e)) {}
    std::vector<InterruptionEvent> events;
    Status problem;
  };
  SourceResult OnNotice(const StatusOr<std::string>& body);
  SourceResult OnLifecycle(const StatusOr<std::string>& body);
  SourceResult OnRebalance(const StatusOr<std::string>& body);
  SourceResult OnScheduled(const StatusOr<std::string>& body);

  void RecordFailure(std::string_view path, const Status& error);
  void RecordSuccess(std::string_view path);
  void Warn(const std::string& message);
  void Info(const std::string& message);

  MetadataService& imds_;
  Clock& clock_;
  const Options options_;
  Clock::WallTime now_{};  // the current poll's time

  std::map<std::string, SourceState, std::less<>> sources_;
  Health health_;

  // What has been reported, so that nothing is reported twice.
  std::set<std::string> notices_seen_;         // "action time"
  std::set<std::string> rebalances_seen_;      // noticeTime
  std::set<std::string> scheduled_seen_;       // EventId
  std::string lifecycle_state_ = "InService";  // the last target state read (the baseline)
};

// "21 Jan 2019 09:00:43 GMT", the style of scheduled-event times in IMDS.
StatusOr<Clock::WallTime> ParseImdsEventTime(std::string_view text);

}  // namespace sg
