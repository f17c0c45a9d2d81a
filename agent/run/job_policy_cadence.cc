// The job policy's checkpoint cadence (docs/agent.md, "Checkpoint cadence"):
// with checkpoint_cadence auto, the trainer is asked for a checkpoint every
// Young's interval (agent/run/checkpoint_cadence.h); each change of the
// interval is logged with its inputs and recorded as a `cadence` event.
#include "agent/run/job_policy.h"
#include "agent/run/job_policy_detail.h"

namespace sg {

using namespace job_policy_detail;  // NOLINT(google-build-using-namespace)

void JobPolicy::AnnounceCadence(PolicyTime t, const std::string& why, JobActions& out) {
  const std::optional<CadenceInputs> in = cadence_->Changed(t.mono);
  if (!in) return;
  Say(out, Level::kInfo, DescribeCadence(*in, why));
  Event(t, "cadence", CadenceDetails(*in, why), out);
}

void JobPolicy::CadenceTick(PolicyTime t, JobActions& out) {
  if (!cadence_) return;
  AnnounceCadence(t, cadence_->started() ? "C or the interruption rate changed" : "start", out);
  if (!cadence_->Due(t.mono)) return;
  if (!o_.checkpoint_signal || !trainer_running_) return;
  out.push_back(job_action::SignalTrainer{"checkpoint_cadence"});
  cadence_->Asked(t.mono, t.wall);
  next_upload_ = t.mono;  // the answer goes up as soon as it is complete
}

void JobPolicy::CadenceCommitted(const Checkpoint& checkpoint, PolicyTime t) {
  if (!cadence_ || !cadence_->asked_wall() || checkpoint.newest_mtime < *cadence_->asked_wall()) {
    return;
  }
  cadence_->Answered(t.mono);
}

void JobPolicy::CadenceLearn(const RestoredState& restored, JobActions& out) {
  if (!cadence_ || !restored.history) return;
  cadence_->Learn(*restored.history);
  Say(out, Level::kInfo, DescribeLearnedMtbf(*restored.history, cadence_->cadence().mtbf(),
                                             o_.cadence->mtbf));
}

JobActions JobPolicy::OnHistoryRead(
    const std::optional<StatusOr<InterruptionHistory>>& history) {
  JobActions out;
  if (!cadence_ || !history) return out;
  if (!history->ok()) {
    Say(out, Level::kWarn,
        Format("reading the job's interruption history failed ({}); the cadence starts from "
               "checkpoint_cadence.mtbf",
               history->status().message()));
    return out;
  }
  RestoredState restored;
  restored.history = **history;
  CadenceLearn(restored, out);
  return out;
}

void JobPolicy::CadenceRebalance(PolicyTime t, JobActions& out) {
  if (phase_ != JobPhase::kTraining) return;
  CadenceWarned(t, "rebalance recommendation", out);
}

void JobPolicy::CadenceWarned(PolicyTime t, const std::string& why, JobActions& out) {
  if (!cadence_) return;
  cadence_->Rebalance(t.mono);
  AnnounceCadence(t, why, out);
}

}  // namespace sg
