// The checkpoint cadence (`checkpoint_cadence: auto`, docs/agent.md,
// "Checkpoint cadence"): the trainer is asked for a checkpoint every
// Young's interval, sqrt(2 * C * MTBF), where C is the measured time from a
// checkpoint request to its commit (a moving estimate) and MTBF the mean
// time between interruptions: a configured prior, or learned from the job's
// own history in the store, divided at a rebalance recommendation by a factor
// that decays back to 1 over time. Pure: every
// input comes with its time (tests/unit/checkpoint_cadence_test.cc).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/config/config.h"
#include "common/clock.h"

namespace sg {

using Seconds = std::chrono::duration<double>;

// Young's interval: sqrt(2 * cost * mtbf).
Seconds YoungInterval(Seconds cost, Seconds mtbf);

struct CadenceOptions {
  Seconds min{300};
  Seconds max{7200};
  Seconds mtbf{6 * 3600.0};  // the prior
  // C before the first measurement.
  Seconds initial_cost{60};
  // Weight of a new measurement of C (exponential moving average).
  double cost_weight = 0.3;
  // A rebalance recommendation multiplies the interruption rate by this...
  double rebalance_factor = 10;
  // ...and the excess halves every this long.
  Seconds rebalance_half_life{1800};
  // A new interval within this fraction of the announced one is not a change.
  double change_threshold = 0.1;
};

// The options of the `checkpoint_cadence` config key (docs/config.md).
CadenceOptions CadenceOptionsOf(const Config::Cadence& key);

// The job's own interruption history, read from its events at start
// (agent/run/interruption_history.h): the time from its first event to now, and
// the interruption notices among them.
struct InterruptionHistory {
  Seconds exposure{0};
  int interruptions = 0;
};

// The MTBF learned from `history`, the prior counting as one interval seen:
// (prior + exposure) / (1 + interruptions). No history gives the prior; a
// long one gives exposure / interruptions.
Seconds LearnedMtbf(Seconds prior, const InterruptionHistory& history);

// The interval and what it was computed from.
struct CadenceInputs {
  Seconds interval{0};
  Seconds cost{0};
  Seconds mtbf{0};
  double rate_factor = 1;  // the rebalance's multiplier now
};

class CheckpointCadence {
 public:
  explicit CheckpointCadence(CadenceOptions options) : o_(options), cost_(options.initial_cost) {}

  // A checkpoint asked for at `requested` was committed at `committed`.
  void OnCommitted(Clock::MonoTime requested, Clock::MonoTime committed);
  void OnRebalance(Clock::MonoTime at) { rebalance_at_ = at; }
  // The MTBF from here on: LearnedMtbf of the prior and `history`.
  void Learn(const InterruptionHistory& history) { mtbf_ = LearnedMtbf(o_.mtbf, history); }
  Seconds mtbf() const { return mtbf_; }

  // The interval at `now`, within [min, max], with its inputs.
  CadenceInputs At(Clock::MonoTime now) const;
  // The interval at `now` when it differs from the last one announced by
  // more than change_threshold (always the first time); it is then the
  // announced one.
  std::optional<CadenceInputs> Changed(Clock::MonoTime now);

  Seconds cost() const { return cost_; }

 private:
  const CadenceOptions o_;
  Seconds cost_;
  Seconds mtbf_{o_.mtbf};  // the prior until Learn
  bool measured_ = false;
  std::optional<Clock::MonoTime> rebalance_at_;
  std::optional<Seconds> announced_;
};

// "checkpoint interval 1h 02m: Young's sqrt(2 x C 90.0s x MTBF 6h 00m)" for the log.
std::string DescribeCadence(const CadenceInputs& in, const std::string& why);
// "the job's history: 2 interruption notice(s) in ..." for the log, once learned.
std::string DescribeLearnedMtbf(const InterruptionHistory& history, Seconds mtbf, Seconds prior);
// The `cadence` event's details: the interval, its inputs and `why`.
nlohmann::ordered_json CadenceDetails(const CadenceInputs& in, const std::string& why);

// When the trainer is asked under the cadence, for one node's policy and a
// group node alike: the next request's time, and the unanswered request whose
// answer measures C. The caller decides which commit answers a request (one
// node: a checkpoint written after it; a group node: a part of a newer step).
class CadenceSchedule {
 public:
  explicit CadenceSchedule(CadenceOptions options) : cadence_(options) {}

  // The interval when it changed (always at the first call): a shorter one
  // moves the next request closer at once, a longer one takes effect after it.
  std::optional<CadenceInputs> Changed(Clock::MonoTime now);
  // True when a request is due at `now` (the next is then one interval on).
  bool Due(Clock::MonoTime now);
  bool started() const { return next_.has_value(); }
  // A request was made; an unanswered one keeps its earlier time.
  void Asked(Clock::MonoTime mono, Clock::WallTime wall);
  std::optional<Clock::WallTime> asked_wall() const { return asked_wall_; }
  bool asking() const { return asked_.has_value(); }
  // The request was answered by a commit at `committed`: C is measured.
  void Answered(Clock::MonoTime committed);

  void Rebalance(Clock::MonoTime at) { cadence_.OnRebalance(at); }
  void Learn(const InterruptionHistory& history) { cadence_.Learn(history); }
  const CheckpointCadence& cadence() const { return cadence_; }

 private:
  CheckpointCadence cadence_;
  std::optional<Clock::MonoTime> next_;
  std::optional<Clock::MonoTime> asked_;
  std::optional<Clock::WallTime> asked_wall_;
};

}  // namespace sg
