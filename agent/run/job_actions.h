// The actions of the node policy (agent/run/job_policy.h; docs/design.md §9):
// what the executor of one node (agent/run/daemon_loop.cc) or of a group's
// member (agent/group/group_node.cc) performs. The second group, "A member's
// coordination", comes only from a policy in member mode: the round's
// records this node writes.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "agent/detect/checkpoint.h"
#include "agent/run/interruption_monitor.h"
#include "common/clock.h"

namespace sg {

namespace job_action {
struct Log {
  enum class Level { kDebug, kInfo, kWarn, kError } level = Level::kInfo;
  std::string message;
};
struct Notify {  // a systemd status line ("STATUS=...", "STOPPING=1")
  std::string state;
};
// Start the trainer. `resume_from_newest_local`: from the newest complete
// local checkpoint (a restart), else from what the restore chose.
struct StartTrainer {
  int attempt = 1;
  bool resume_from_newest_local = false;
};
struct SignalTrainer {  // the checkpoint signal
  std::string why;      // for the log: "the notice", "checkpoint_interval", ...
};
// List the complete checkpoints; answer with OnCheckpoints.
struct FindCheckpoints {};
// Upload `checkpoint` in the background; answer with OnUploadFinished.
struct StartUpload {
  Checkpoint checkpoint;
  bool final = false;  // the last snapshot of the job: never cancelled
};
struct CancelUpload {};  // the upload in flight ends soon, as kNotCommitted or not at all
// The notice file: the event's, or without one a request's saying `why`;
// a member's carries its round.
struct WriteNoticeFile {
  std::optional<InterruptionEvent> event;
  std::string why;
  std::optional<uint64_t> round;
};
struct RemoveNoticeFile {};
// Stop the trainer (stop_signal, SIGKILL after `grace`); answer with
// OnTrainerStopped. `in_background`: the loop goes on while it stops (a
// member leaving a round keeps its beats and the lease).
struct StopTrainer {
  std::chrono::milliseconds grace{0};
  bool in_background = false;
};
struct RecordEvent {
  std::string kind;
  nlohmann::ordered_json data;
  // When it happened: a deferred event is written later (docs/design.md §9).
  std::optional<Clock::WallTime> at;
};
struct RunRetention {};
struct CompleteLifecycleHook {};
struct WriteCompleteMarker {
  std::optional<uint64_t> seq;
  std::optional<int64_t> step;
};
struct PerformOnComplete {};
struct ReleaseLease {};
struct Exit {  // always the last action
  int code = 0;
};

// A member's coordination: the records of its round (docs/design.md §14),
// each a store write the executor posts off its loop.
struct EndRound {  // the round is over for every node, and why
  std::string why;  // "crash", "restore", "unearned", "notice", "stop", "left"
  std::string detail;
};
struct LeaveGroup {};  // remove this member's record: it is on its way out
struct MarkAsked {     // the newest step this rank had when asked for a checkpoint
  std::optional<int64_t> after;
};
struct MarkFlush {  // this rank was warned (a rebalance): the group flushes
  std::optional<int64_t> step;
};
struct MarkDone {  // this rank's trainer finished; answer with OnDoneMarked
  std::optional<int64_t> step;
};
// The part just stored is announced under the round; answer with
// OnPartAnnounced.
struct AnnouncePart {
  int64_t step = 0;
  uint64_t seq = 0;
  uint64_t bytes = 0;
  uint64_t stored = 0;
  uint64_t fresh = 0;  // of `stored`, what went over the wire
  double seconds = 0;
};
struct RoundLeft {};  // the round is over on this node: wait for the next
}  // namespace job_action

using JobAction =
    std::variant<job_action::Log, job_action::Notify, job_action::StartTrainer,
                 job_action::SignalTrainer, job_action::FindCheckpoints, job_action::StartUpload,
                 job_action::CancelUpload, job_action::WriteNoticeFile,
                 job_action::RemoveNoticeFile, job_action::StopTrainer, job_action::RecordEvent,
                 job_action::RunRetention, job_action::CompleteLifecycleHook,
                 job_action::WriteCompleteMarker, job_action::PerformOnComplete,
                 job_action::ReleaseLease, job_action::Exit, job_action::EndRound,
                 job_action::LeaveGroup, job_action::MarkAsked, job_action::MarkFlush,
                 job_action::MarkDone, job_action::AnnouncePart, job_action::RoundLeft>;
using JobActions = std::vector<JobAction>;

// Performs a Log action: the agent's log at its level.
void WriteToLog(const job_action::Log& log);

// Performs `actions` in order with `perform`, which returns what the policy
// answered to the observation an action fed straight back (a listing, a
// stopped trainer): those follow the actions already queued. Stops early
// once `done()` (an exit).
template <typename Perform, typename Done>
void PerformInOrder(JobActions actions, Perform&& perform, Done&& done) {
  std::deque<JobAction> queue(std::make_move_iterator(actions.begin()),
                              std::make_move_iterator(actions.end()));
  while (!queue.empty() && !done()) {
    const JobAction action = std::move(queue.front());
    queue.pop_front();
    for (JobAction& next : perform(action)) queue.push_back(std::move(next));
  }
}

}  // namespace sg
