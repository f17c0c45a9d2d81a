// A group node's checkpoint cadence (docs/multi-node.md, "Checkpoint
// cadence"): with checkpoint_cadence auto, each node asks its own trainer at
// Young's interval, as one node's policy does (agent/run/checkpoint_cadence.h).
// C is the time from a request to this node's part of a newer step stored;
// the interruption rate rises at a rebalance recommendation on this node, at
// another member's (its flush record), and at another member's notice, since
// spot interruptions of one group come together.
#include "agent/group/group_agent_impl.h"

namespace sg::group_detail {

void GroupAgent::CadenceTick(Clock::MonoTime now) {
  AnnounceCadence(now, cadence_->started() ? "C or the interruption rate changed" : "start");
  if (!cadence_->Due(now) || trainer_done_ || !trainer_ || !trainer_->running()) return;
  AskTrainer("checkpoint_cadence");
  if (!cadence_->asking()) {
    auto all = RoundCheckpoints();
    cadence_after_.reset();
    if (all.ok() && !all->empty()) cadence_after_ = all->front().step;
    cadence_->Asked(now, c_.clock.Now());
  }
  next_periodic_ = now;  // the answer goes up as soon as it is complete
}

void GroupAgent::CadenceRebalance(Clock::MonoTime now, const std::string& why) {
  if (!cadence_) return;
  cadence_->Rebalance(now);
  AnnounceCadence(now, why);
}

void GroupAgent::AnnounceCadence(Clock::MonoTime now, const std::string& why) {
  const std::optional<CadenceInputs> in = cadence_->Changed(now);
  if (!in) return;
  LogInfo("{}", DescribeCadence(*in, why));
  Event("cadence", CadenceDetails(*in, why));
}

void GroupAgent::CadenceStored(int64_t step) {
  if (!cadence_ || !cadence_->asking() || (cadence_after_ && step <= *cadence_after_)) return;
  cadence_->Answered(c_.clock.Monotonic());
}

void GroupAgent::CadenceLearn(const std::optional<StatusOr<InterruptionHistory>>& history) {
  if (!cadence_ || !history) return;
  if (!history->ok()) {
    LogWarn("reading the job's interruption history failed ({}); the cadence starts from "
            "checkpoint_cadence.mtbf",
            history->status().message());
    return;
  }
  cadence_->Learn(**history);
  LogInfo("{}", DescribeLearnedMtbf(**history, cadence_->cadence().mtbf(),
                                    CadenceOptionsOf(cfg_.checkpoint_cadence).mtbf));
}

}  // namespace sg::group_detail
