#include "agent/run/checkpoint_cadence.h"

#include <algorithm>
#include <cmath>

#include "common/log.h"

namespace sg {

Seconds YoungInterval(Seconds cost, Seconds mtbf) {
  return Seconds(std::sqrt(2.0 * std::max(cost.count(), 0.0) * std::max(mtbf.count(), 0.0)));
}

CadenceOptions CadenceOptionsOf(const Config::Cadence& key) {
  return CadenceOptions{.min = key.min, .max = key.max, .mtbf = key.mtbf};
}

Seconds LearnedMtbf(Seconds prior, const InterruptionHistory& history) {
  const double exposure = std::max(history.exposure.count(), 0.0);
  return Seconds((prior.count() + exposure) / (1.0 + std::max(history.interruptions, 0)));
}

void CheckpointCadence::OnCommitted(Clock::MonoTime requested, Clock::MonoTime committed) {
  const Seconds sample = std::chrono::duration_cast<Seconds>(committed - requested);
  if (sample.count() <= 0) return;
  cost_ = measured_ ? Seconds(o_.cost_weight * sample.count() +
                              (1 - o_.cost_weight) * cost_.count())
                    : sample;
  measured_ = true;
}

CadenceInputs CheckpointCadence::At(Clock::MonoTime now) const {
  CadenceInputs in;
  in.cost = cost_;
  if (rebalance_at_ && now >= *rebalance_at_) {
    const double age = std::chrono::duration_cast<Seconds>(now - *rebalance_at_).count();
    in.rate_factor =
        1 + (o_.rebalance_factor - 1) * std::exp2(-age / o_.rebalance_half_life.count());
  }
  in.mtbf = Seconds(mtbf_.count() / in.rate_factor);
  in.interval = std::clamp(YoungInterval(in.cost, in.mtbf), o_.min, o_.max);
  return in;
}

std::optional<CadenceInputs> CheckpointCadence::Changed(Clock::MonoTime now) {
  const CadenceInputs in = At(now);
  if (announced_ &&
      std::abs(in.interval.count() - announced_->count()) <=
          o_.change_threshold * announced_->count()) {
    return std::nullopt;
  }
  announced_ = in.interval;
  return in;
}

std::string DescribeCadence(const CadenceInputs& in, const std::string& why) {
  return Format(
      "checkpoint interval {:.0f}s ({}): Young's sqrt(2 x C {:.1f}s x MTBF {:.0f}s), MTBF the "
      "job's (its history and the prior) / {:.2f} for a rebalance recommendation, within "
      "checkpoint_cadence min and max",
      in.interval.count(), why, in.cost.count(), in.mtbf.count(), in.rate_factor);
}

std::string DescribeLearnedMtbf(const InterruptionHistory& history, Seconds mtbf, Seconds prior) {
  return Format(
      "the job's history: {} interruption notice(s) in {:.1f} h since its first event: MTBF "
      "{:.1f} h for the checkpoint cadence (prior {:.1f} h)",
      history.interruptions, history.exposure.count() / 3600, mtbf.count() / 3600,
      prior.count() / 3600);
}

nlohmann::ordered_json CadenceDetails(const CadenceInputs& in, const std::string& why) {
  return {{"interval_seconds", in.interval.count()},
          {"cost_seconds", in.cost.count()},
          {"mtbf_seconds", in.mtbf.count()},
          {"rate_factor", in.rate_factor},
          {"why", why}};
}

std::optional<CadenceInputs> CadenceSchedule::Changed(Clock::MonoTime now) {
  const std::optional<CadenceInputs> in = cadence_.Changed(now);
  if (!in) return std::nullopt;
  const auto interval = std::chrono::duration_cast<std::chrono::milliseconds>(in->interval);
  next_ = next_ ? std::min(*next_, now + interval) : now + interval;
  return in;
}

bool CadenceSchedule::Due(Clock::MonoTime now) {
  if (!next_ || now < *next_) return false;
  next_ = now + std::chrono::duration_cast<std::chrono::milliseconds>(cadence_.At(now).interval);
  return true;
}

void CadenceSchedule::Asked(Clock::MonoTime mono, Clock::WallTime wall) {
  if (asked_) return;
  asked_ = mono;
  asked_wall_ = wall;
}

void CadenceSchedule::Answered(Clock::MonoTime committed) {
  if (!asked_) return;
  cadence_.OnCommitted(*asked_, committed);
  asked_.reset();
  asked_wall_.reset();
}

}  // namespace sg
