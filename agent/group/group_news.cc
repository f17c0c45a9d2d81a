// Notices, rebalance recommendations and stop signals (docs/design.md §14,
// "Notices"): read on the loop, as one node's agent reads them, and handed
// to the node policy (agent/run/job_policy.h in member mode), which asks the
// trainer for its checkpoint on the turn that reads the notice and ends the
// round behind it. Since no store call runs on the loop, nothing delays them.
#include <algorithm>

#include "agent/group/group_agent_impl.h"
#include "agent/run/notice_budget.h"

namespace sg::group_detail {

void GroupAgent::Watch(Clock::MonoTime now, TurnNews turn) {
  // The deadline the exit keeps: the earliest of those read.
  auto keep = [&](Clock::MonoTime deadline) {
    if (!deadline_ || deadline < *deadline_) deadline_ = deadline;
  };
  if (turn.stop_signal) {
    keep(now + duration_cast<milliseconds>(cfg_.stop_timeout));
    // On its way out: the ledger's events wait until the trainer is stopped.
    defer_events_ = true;
    PerformNode(node_.OnStopSignal(Now()));
  }
  // What the start read, then the poll's news (the shell's poll runs on a
  // thread of its own: agent/run/metadata_poll.h).
  std::vector<InterruptionEvent> events = std::exchange(start_others_, {});
  for (InterruptionEvent& e : turn.events) events.push_back(std::move(e));
  for (const InterruptionEvent& e : events) {
    if (exit_code_) return;
    if (e.IsNotice()) {
      keep(now + (e.time ? duration_cast<milliseconds>(*e.time - c_.clock.Now())
                         : kGroupEndBudget));
      defer_events_ = true;
      // The Auto Scaling hook waits for this node's CONTINUE, sent after the stop.
      lifecycle_due_ = notice_read_ = true;
    }
    PerformNode(node_.OnInterruption(Now(), e, e.IsNotice() ? NewestPartBytes() : 0));
  }
}

}  // namespace sg::group_detail
