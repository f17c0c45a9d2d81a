// The job policy's side of resuming (docs/design.md §9): the fall back from
// a snapshot the trainer cannot resume from (agent/run/suspect.h).
#include "agent/run/job_policy.h"
#include "agent/run/job_policy_detail.h"
#include "agent/repo/store_names.h"
#include "common/log.h"

namespace sg {

using namespace job_policy_detail;  // NOLINT(google-build-using-namespace)

JobActions JobPolicy::OnFallback(PolicyTime t, uint64_t suspect,
                                 const RestoredState& restored) {
  JobActions out;
  if (phase_ != JobPhase::kTraining) return out;
  // What the store holds for this job is now the older snapshot's state:
  // checkpoints the trainer writes from it are new work, even at steps
  // below the suspect one's.
  committed_ = restored.committed;
  committed_step_ = restored.committed_step;
  last_seq_ = restored.last_seq;
  // The older snapshot gets the whole restart budget.
  restarts_ = 0;
  Say(out, Level::kWarn,
      Format("falling back from suspect snapshot {} to {}", SeqName(suspect),
             restored.last_seq ? SeqName(*restored.last_seq) : std::string("a fresh start")));
  Event(t, "fallback",
        {{"suspect", suspect}, {"seq", OrNull(restored.last_seq)}, {"resume", restored.resume}},
        out);
  return out;
}

}  // namespace sg
