// What the agent decides (docs/design.md §9). The job policy is a state
// machine over the job's phases. Its inputs are observations: the time, the
// lease, the restore, the complete checkpoints, the trainer's exit, a notice
// or rebalance recommendation, a stop signal and an upload's result. Its
// outputs are actions, which the executor (agent/run/daemon.cc for one node,
// agent/group/group_node.cc for a group's member, in member mode) performs
// and answers with further observations. The policy touches no clock,
// process, file or store, so each decision is tested in milliseconds
// (tests/unit/job_policy_test.cc, job_policy_member_test.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "agent/detect/checkpoint.h"
#include "agent/run/checkpoint_cadence.h"
#include "agent/config/config.h"
#include "agent/run/interruption_monitor.h"
#include "agent/run/job_actions.h"
#include "agent/run/job_policy_member.h"
#include "common/clock.h"
#include "common/process.h"
#include "common/status.h"

namespace sg {

enum class JobPhase {
  kLease,          // waiting for the job's lease
  kRestore,        // the lease is held; the newest good snapshot is being restored
  kTraining,       // the trainer runs (or waits for its restart); periodic uploads
  kFinalSnapshot,  // the job is ending: wait for a checkpoint, upload the newest
  kStopping,       // the trainer is being stopped; then housekeeping and exit
  kDone,           // the exit code is decided
};

// Why the job ends.
enum class JobEnd { kNone, kNotice, kSignal, kComplete, kFenced, kFailed };

struct JobPolicyOptions {
  std::chrono::milliseconds upload_interval{300'000};
  std::optional<std::chrono::milliseconds> checkpoint_interval;
  std::optional<int> checkpoint_signal;  // the trainer writes a checkpoint on this signal
  // checkpoint_cadence auto: requests at Young's interval, in place of
  // checkpoint_interval (agent/run/checkpoint_cadence.h).
  std::optional<CadenceOptions> cadence;
  bool snapshot_on_rebalance = true;
  int restart_max = 3;
  std::chrono::milliseconds restart_backoff{10'000};
  std::chrono::milliseconds restart_max_backoff{300'000};
  std::chrono::milliseconds stop_grace{60'000};
  // After SIGTERM, the time until the engine's kill (its grace period): the
  // final upload is given up on in time to stop the trainer before it.
  std::chrono::milliseconds stop_timeout{120'000};
  // How long a written file takes to count as complete: after the trainer
  // exits, its last checkpoint may still be settling.
  std::chrono::milliseconds settle{2'000};
  // A member of a group (nodes > 1): the round's coordination decides a
  // trainer's exit, the part to upload and the answer to a request
  // (agent/run/job_policy_member.h).
  bool member = false;

  static JobPolicyOptions FromConfig(const Config& config);
};

// Both clocks at the moment of an observation: monotonic for deadlines, wall
// for comparing with file times and a notice's deadline.
struct PolicyTime {
  Clock::MonoTime mono;
  Clock::WallTime wall;
};

// What the restore phase established.
struct RestoredState {
  std::optional<CheckpointMark> committed;  // newest checkpoint the store holds
  std::optional<int64_t> committed_step;
  std::optional<uint64_t> last_seq;  // of that snapshot
  bool upload_first = false;         // a local checkpoint the store lacks
  std::string resume;                // what the trainer starts from; "" = fresh
  // The job's interruption history (checkpoint_cadence auto only): the
  // cadence learns its MTBF from it.
  std::optional<InterruptionHistory> history;
};

// How an upload ended.
struct UploadOutcome {
  enum class Kind {
    kCommitted,     // the snapshot is committed
    kNotCommitted,  // cancelled, a file changed while read, or pre-empted: look again soon
    kFailed,        // an error; the next periodic look tries again
    kFenced,        // a successor holds the job: commit nothing more
  };
  Kind kind = Kind::kCommitted;
  uint64_t seq = 0;
  uint64_t bytes = 0;
  uint64_t stored_bytes = 0;
  double seconds = 0;
  std::string message;  // why, when not committed
  // Of stored_bytes, those referenced in earlier objects (not uploaded).
  uint64_t reused_bytes = 0;
};



class JobPolicy {
 public:
  explicit JobPolicy(JobPolicyOptions options);

  JobPhase phase() const { return phase_; }
  JobEnd end() const { return end_; }
  std::optional<int> exit_code() const { return exit_code_; }
  // Seconds from the notice to the final commit; nullopt without either.
  std::optional<double> notice_to_commit() const { return notice_to_commit_; }
  std::optional<int64_t> committed_step() const { return committed_step_; }
  // The newest checkpoint the store holds, and its snapshot's seq.
  const std::optional<CheckpointMark>& committed() const { return committed_; }
  std::optional<uint64_t> last_seq() const { return last_seq_; }
  // Step of the newest snapshot committed in this run; nullopt when none was.
  std::optional<int64_t> committed_step_this_run() const { return committed_this_run_; }
  // The deadline the job's end must meet, on our monotonic clock: a
  // notice's, or stop_timeout after SIGTERM; nullopt without either.
  std::optional<Clock::MonoTime> deadline() const {
    if (end_ == JobEnd::kNotice) return notice_at_ + left_;
    return stop_deadline_;
  }

  // kLease -> kRestore.
  JobActions OnLeaseAcquired(PolicyTime t);
  // kRestore -> kTraining: start the trainer.
  JobActions OnRestored(PolicyTime t, const RestoredState& restored);
  // Every pass of the loop.
  JobActions OnTick(PolicyTime t);
  // The answer to FindCheckpoints: complete checkpoints, newest first, and
  // when something now settling is due to become complete.
  // `writing`: a checkpoint file is being written (not settled yet).
  JobActions OnCheckpoints(PolicyTime t, const std::vector<Checkpoint>& newest_first,
                           std::optional<Clock::MonoTime> next_settle, bool writing = false);
  JobActions OnUploadFinished(PolicyTime t, const UploadOutcome& outcome);
  // `unearned`: why an exit 0 does not complete the job (complete_when,
  // agent/detect/completion.h); such an exit is handled as a crash.
  JobActions OnTrainerExited(PolicyTime t, const ExitStatus& status,
                             const std::optional<std::string>& unearned = std::nullopt);
  JobActions OnTrainerStartFailed(PolicyTime t, const std::string& why);
  // kTraining: snapshot `suspect` was marked (agent/run/suspect.h) and `restored`
  // is the older one the executor restored in its place; the restarts count
  // again from 0 (agent/run/job_policy_resume.cc).
  JobActions OnFallback(PolicyTime t, uint64_t suspect, const RestoredState& restored);
  JobActions OnTrainerStopped(PolicyTime t);
  // A metadata event. `newest_bytes`: the size of the newest complete local
  // checkpoint, which a notice's budget expects to upload.
  JobActions OnInterruption(PolicyTime t, const InterruptionEvent& event, uint64_t newest_bytes);
  JobActions OnStopSignal(PolicyTime t);
  // The lease is lost to a successor: commit nothing more.
  JobActions OnFenced(PolicyTime t, const std::string& why);

  // Member mode only (agent/run/job_policy_member.cc). kLease is waiting
  // for a round, kRestore restoring this node's part, kTraining the round,
  // kFinalSnapshot its end on a request, kStopping leaving it; then kLease
  // again, or kDone when the node leaves the group.
  // The node joins `round` as `rank`: kLease -> kRestore (OnRestored next).
  JobActions OnRoundJoined(PolicyTime t, uint64_t round, int rank);
  JobActions OnRestoreFailed(PolicyTime t, const std::string& why);
  // What a look read of the round.
  JobActions OnRoundRead(PolicyTime t, const RoundNews& news);
  // The group asks for a checkpoint (a notice on `warned`, "" for none):
  // the round ends once a group snapshot answers it, or at `deadline`.
  JobActions OnGroupRequest(PolicyTime t, Clock::MonoTime deadline, const std::string& warned);
  // The round ended (another node's end record): stop the trainer, wait
  // for the next round.
  JobActions OnLeave(PolicyTime t, const std::string& why);
  // The answers to AnnouncePart and MarkDone, for `round`.
  JobActions OnPartAnnounced(PolicyTime t, uint64_t round, const job_action::AnnouncePart& part,
                             bool ok);
  JobActions OnDoneMarked(PolicyTime t, uint64_t round, bool ok);
  // checkpoint_cadence auto: the job's interruption history, read at the
  // start (a failure is logged; the cadence starts from its mtbf).
  JobActions OnHistoryRead(const std::optional<StatusOr<InterruptionHistory>>& history);
  // The round this member takes part in (kRestore..kStopping).
  const std::optional<MemberRound>& member_round() const { return round_; }
  // The node is on its way out of the group (its notice or stop signal).
  bool leaving() const { return leaving_; }

 private:
  struct Upload {
    Checkpoint checkpoint;
    bool final = false;
  };

  // Leaves kTraining for kFinalSnapshot: cancel the periodic upload, ask
  // the trainer for a checkpoint (by signal when `signal`) and wait for one
  // until `until`, and for a write in progress until `hard_until`.
  void BeginFinal(PolicyTime t, JobEnd end, Clock::MonoTime until, Clock::MonoTime hard_until,
                  bool signal, JobActions& out);
  // kFinalSnapshot: upload the newest uncommitted checkpoint, or stop.
  void DecideFinal(PolicyTime t, const std::vector<Checkpoint>& newest_first, bool writing,
                   JobActions& out);
  void Stop(PolicyTime t, JobActions& out);
  // kStopping, trainer stopped: a checkpoint it wrote on the stop signal
  // goes up too, when time allows; then the end.
  void AfterStop(PolicyTime t, const std::vector<Checkpoint>& newest_first, bool writing,
                 JobActions& out);
  void Finish(PolicyTime t, JobActions& out);
  // Starts the final upload of `target`, to be given up on at give_up_at_.
  void StartFinalUpload(PolicyTime t, const Checkpoint& target, JobActions& out);
  // The deadline (a notice's, SIGTERM's) is near and the final upload still
  // runs (a store that does not answer): stop waiting for it, end without it.
  void GiveUpUpload(PolicyTime t, JobActions& out);
  void Committed(PolicyTime t, const UploadOutcome& outcome, const Checkpoint& checkpoint,
                 JobActions& out);
  // Records the event `kind` as happening at t (deferred while the job ends).
  void Event(PolicyTime t, std::string kind, nlohmann::ordered_json data, JobActions& out);
  void Housekeeping(JobActions& out);
  void Exit(int code, bool release_lease, JobActions& out);
  std::chrono::milliseconds Backoff() const;
  // checkpoint_cadence auto (agent/run/job_policy_cadence.cc): every tick in
  // kTraining; a commit; a rebalance recommendation.
  void CadenceTick(PolicyTime t, JobActions& out);
  void CadenceCommitted(const Checkpoint& checkpoint, PolicyTime t);
  // The MTBF from the job's history at start, when it was read (logged).
  void CadenceLearn(const RestoredState& restored, JobActions& out);
  void CadenceRebalance(PolicyTime t, JobActions& out);
  // A warning (this node's or, in a group, another member's) raises the
  // interruption rate; logged and recorded with `why`.
  void CadenceWarned(PolicyTime t, const std::string& why, JobActions& out);
  void AnnounceCadence(PolicyTime t, const std::string& why, JobActions& out);

  // Member mode (agent/run/job_policy_member.cc, job_policy_member_end.cc).
  JobActions MemberRestored(PolicyTime t, const RestoredState& restored);
  JobActions MemberTick(PolicyTime t);
  JobActions MemberCheckpoints(PolicyTime t, const std::vector<Checkpoint>& newest_first,
                               bool writing);
  JobActions MemberUploadFinished(PolicyTime t, const UploadOutcome& outcome);
  JobActions MemberTrainerExited(PolicyTime t, const ExitStatus& status,
                                 const std::optional<std::string>& unearned);
  JobActions MemberStartFailed(PolicyTime t, const std::string& why);
  JobActions MemberTrainerStopped(PolicyTime t);
  JobActions MemberInterruption(PolicyTime t, const InterruptionEvent& event,
                                uint64_t newest_bytes);
  JobActions MemberStopSignal(PolicyTime t);
  // The first notice or stop signal, in any phase: the notice file and the
  // checkpoint signal at once.
  void MemberAsk(PolicyTime t, const InterruptionEvent* notice, const std::string& why,
                 JobActions& out);
  // Starts the upload of the part ChooseUpload picks, if any.
  void UploadPart(PolicyTime t, const std::vector<Checkpoint>& newest_first, JobActions& out);
  void MarkDoneWhenStored(const std::vector<Checkpoint>& newest_first, bool writing,
                          JobActions& out);
  // kTraining -> kFinalSnapshot: the request is recorded on the next
  // listing (asked_after); `noticed`: this node leaves the group after it.
  // `ask_at`: MemberAsk asked the trainer then (this node's notice or
  // signal); else it is asked now, for `why`.
  void BeginEnding(PolicyTime t, Clock::MonoTime deadline, bool noticed,
                   std::optional<Clock::WallTime> ask_at, const std::string& why,
                   JobActions& out);
  // A notice or stop signal while this node's part is restored: `left`, exit.
  void LeaveBeforeTraining(PolicyTime t, const std::string& why, JobActions& out);
  void TakeAsk(PolicyTime t, const std::vector<Checkpoint>& newest_first, JobActions& out);
  void DecideEnding(PolicyTime t, const std::vector<Checkpoint>& newest_first, JobActions& out);
  // Ends the round on this node: `why` names the end written, if any.
  void LeaveRound(PolicyTime t, const std::string& why, JobActions& out);
  void FinishLeaving(PolicyTime t, JobActions& out);
  void MemberExit(int code, JobActions& out);
  void MemberCadenceTick(PolicyTime t, JobActions& out);
  void TakeFlushes(PolicyTime t, const std::map<int, std::optional<int64_t>>& flushes,
                   JobActions& out);

  const JobPolicyOptions o_;
  JobPhase phase_ = JobPhase::kLease;
  JobEnd end_ = JobEnd::kNone;
  std::optional<int> exit_code_;

  int attempt_ = 0;
  int restarts_ = 0;
  bool trainer_running_ = false;
  std::optional<Clock::MonoTime> restart_at_;

  std::optional<CheckpointMark> committed_;
  std::optional<int64_t> committed_step_;
  std::optional<int64_t> committed_this_run_;
  std::optional<uint64_t> last_seq_;
  double upload_rate_;  // bytes per second, measured by the last commit
  std::optional<Upload> upload_;
  Clock::MonoTime next_upload_{};
  Clock::MonoTime next_checkpoint_signal_{};
  std::optional<CadenceSchedule> cadence_{
      o_.cadence ? std::optional<CadenceSchedule>(std::in_place, *o_.cadence) : std::nullopt};

  // kFinalSnapshot
  Clock::MonoTime final_until_{};       // waiting for an answer until then
  Clock::MonoTime final_hard_until_{};  // and for a write in progress until then
  bool stopped_ = false;                // the trainer is stopped (kStopping)
  Clock::MonoTime after_stop_until_{};
  std::optional<CheckpointMark>
      seen_before_stop_;  // the newest at the final decision  // a checkpoint written on the stop
                          // settles until then
  double seen_late_ = 0;  // seconds from the notice's posting to our reading
  std::optional<CheckpointMark> asked_;  // the checkpoint request; newer answers it
  Clock::MonoTime notice_at_{};
  std::chrono::milliseconds left_{0};             // at the notice, to its deadline
  std::optional<Clock::MonoTime> stop_deadline_;  // SIGTERM's: stop_timeout after it
  std::optional<InterruptionEvent> notice_;
  std::optional<uint64_t> final_seq_;    // committed by the final upload
  int final_attempts_ = 0;               // final uploads started
  bool final_failed_ = false;            // a checkpoint newer than the store's was not committed
  bool gave_up_ = false;                 // an upload was given up on
  Clock::MonoTime cancelled_until_{};    // the cancelled periodic upload is waited for until then
  Clock::MonoTime give_up_at_{};         // a final upload still running then is abandoned
  Clock::MonoTime final_retry_until_{};  // a failed final upload is tried again until then
  std::optional<double> notice_to_commit_;
  double stopping_elapsed_ = 0;  // seconds from the notice to the stop
  std::string fenced_why_;

  // Member mode: the round, and what lives across rounds.
  std::optional<MemberRound> round_;
  bool leaving_ = false;                   // a notice or stop signal: no next round
  std::optional<Clock::WallTime> ask_at_;  // the first notice or stop signal came then
  std::optional<int64_t> group_step_;      // of the newest group snapshot, as last read
  std::optional<int64_t> cadence_after_;   // a part newer than this answers the cadence
  std::optional<uint64_t> upload_round_;   // the round the upload in flight belongs to
  std::string stepless_warned_;            // a checkpoint without a step, said once

  // Housekeeping waits while the job ends (docs/design.md §9).
  bool defer_ = false;
  std::vector<job_action::RecordEvent> deferred_events_;
  bool retention_due_ = false;
};

}  // namespace sg
