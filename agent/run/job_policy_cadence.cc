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
  const auto interval = duration_cast<milliseconds>(in->interval);
  // A shorter interval takes effect at once; a longer one from the next request.
  next_cadence_ = next_cadence_ ? std::min(*next_cadence_, t.mono + interval) : t.mono + interval;
  Say(out, Level::kInfo, DescribeCadence(*in, why));
  Event(t, "cadence",
        {{"interval_seconds", in->interval.count()},
         {"cost_seconds", in->cost.count()},
         {"mtbf_seconds", in->mtbf.count()},
         {"rate_factor", in->rate_factor},
         {"why", why}},
        out);
}

void JobPolicy::CadenceTick(PolicyTime t, JobActions& out) {
  if (!cadence_) return;
  AnnounceCadence(t, next_cadence_ ? "C or the interruption rate changed" : "start", out);
  if (t.mono < *next_cadence_) return;
  next_cadence_ = t.mono + duration_cast<milliseconds>(cadence_->At(t.mono).interval);
  if (!o_.checkpoint_signal || !trainer_running_) return;
  out.push_back(job_action::SignalTrainer{});
  if (!cadence_asked_) cadence_asked_ = t;  // an unanswered request keeps its time
  next_upload_ = t.mono;  // the answer goes up as soon as it is complete
}

void JobPolicy::CadenceCommitted(const Checkpoint& checkpoint, PolicyTime t) {
  if (!cadence_ || !cadence_asked_ || checkpoint.newest_mtime < cadence_asked_->wall) return;
  cadence_->OnCommitted(cadence_asked_->mono, t.mono);
  cadence_asked_.reset();
}

void JobPolicy::CadenceLearn(const RestoredState& restored, JobActions& out) {
  if (!cadence_ || !restored.history) return;
  cadence_->Learn(*restored.history);
  Say(out, Level::kInfo,
      Format("the job's history: {} interruption notice(s) in {:.1f} h since its first event: "
             "MTBF {:.1f} h for the checkpoint cadence (prior {:.1f} h)",
             restored.history->interruptions, restored.history->exposure.count() / 3600,
             cadence_->mtbf().count() / 3600, o_.cadence->mtbf.count() / 3600));
}

void JobPolicy::CadenceRebalance(PolicyTime t, JobActions& out) {
  if (!cadence_ || phase_ != JobPhase::kTraining) return;
  cadence_->OnRebalance(t.mono);
  AnnounceCadence(t, "rebalance recommendation", out);
}

}  // namespace sg
