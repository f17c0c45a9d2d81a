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

}  // namespace sg
