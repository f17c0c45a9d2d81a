// The class behind RunGroupAgent (agent/group/group_agent.h; docs/design.md §14),
// the group role of the one loop (agent/run/node_shell.h), shared by its
// files: group_agent.cc (setup, the member record, the lease),
// group_agent_run.cc (the run, the role's turn and the exit),
// group_news.cc (notices and stop signals), group_view.cc (reading the
// round), group_perform.cc (performing the group policy's actions:
// agent/group/group_policy.h decides), group_member.cc (joining a round, the
// trainer, part uploads), group_ending.cc (ending and leaving a round) and
// group_duties.cc. Internal to those files.
//
// One thread runs the loop (RunNodeLoop). Every store call the role makes is
// posted to `calls_` (common/loop_calls.h), which runs them in order off the
// loop and hands each result back to the loop as an observation; the
// metadata service and the signals are read by the shell, for one node and
// for a group alike.
#pragma once

#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/trainer/checkpoint_signal.h"
#include "agent/run/checkpoint_cadence.h"
#include "agent/run/daemon.h"
#include "agent/ledger/events.h"
#include "agent/group/group_policy.h"
#include "agent/repo/group_protocol.h"
#include "agent/repo/group_store.h"
#include "agent/repo/group_suspect.h"
#include "agent/trainer/host_lock.h"
#include "agent/run/instance_prices.h"
#include "agent/run/interruption_monitor.h"
#include "agent/run/metadata_poll.h"
#include "agent/run/node_shell.h"
#include "agent/run/metrics_file.h"
#include "agent/run/start_watch.h"
#include "agent/logs/job_logs.h"
#include "agent/run/job_ports_real.h"
#include "agent/run/notice_budget.h"
#include "agent/repo/lease.h"
#include "agent/repo/repository.h"
#include "agent/trainer/supervisor.h"
#include "agent/trainer/trainer_record.h"
#include "agent/repo/restorer.h"
#include "common/background_call.h"
#include "common/background_queue.h"
#include "common/loop_calls.h"
#include "common/files.h"
#include "common/sd_notify.h"

namespace sg::group_detail {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

// The store is read for the round's news every quarter heartbeat, between
// these bounds (docs/multi-node.md, "Cost in S3 requests").
constexpr auto kMinLook = milliseconds(250);
constexpr auto kMaxLook = milliseconds(2'000);
// The longest a trainer is given to stop when its node leaves a round.
constexpr auto kMaxLeaveGrace = milliseconds(10'000);
// The process ends this long before a notice's deadline at the latest.
constexpr auto kExitBefore = milliseconds(1'000);

// Where the loop's store calls run: the ports' runner, else on the caller's
// thread with inline_store_work, else a thread of their own.
inline LoopCalls::Runner CallRunner(const AgentPorts& ports) {
  if (ports.loop_calls) return ports.loop_calls;
  if (ports.inline_store_work) return [](std::function<void()> task) { task(); };
  return nullptr;
}

// What the turn read from the metadata service and the stop signals, sorted.
struct News {
  std::vector<InterruptionEvent> notices;
  std::vector<InterruptionEvent> others;  // rebalance recommendations and the like
  bool stop_signal = false;
};

// The lease as the calls left it.
struct LeaseState {
  bool held = false;
  uint64_t generation = 0;
  bool acquired = false;  // taken by this call
  Status status;
};

// The group role of the one loop (agent/run/node_shell.h): the round
// protocol around this node's trainer.
class GroupAgent final : public NodeRole {
 public:
  explicit GroupAgent(const AgentContext& c)
      : c_(c),
        cfg_(c.config),
        group_(Repository::Open(c.store, cfg_.job).Group()),
        events_(c.store, c.clock, cfg_.job, c.instance),
        lease_(c.lease_store ? *c.lease_store : c.store, c.clock, cfg_.job, c.instance,
               LeaseOptions{cfg_.lease.heartbeat, cfg_.lease.timeout}),
        notice_file_(NoticeFilePath(cfg_)),
        launcher_(cfg_, c.env, notice_file_, TrainerRecordPath(cfg_.checkpoint_dir)),
        uploader_([this](const Checkpoint& ck,
                         const std::atomic<bool>* cancel) { return WritePart(ck, cancel); },
                  c.clock, CallRunner(c.ports)),
        autoscaling_(c.aws, c.clock),
        signal_target_(CheckpointSignalTarget(cfg_.command)) {
    if (cfg_.checkpoint_cadence.automatic) cadence_.emplace(CadenceOptionsOf(cfg_.checkpoint_cadence));
  }

  AgentResult Run();
  // Work was left running at the exit (a store call, an upload, a restore,
  // retention, a log shipment): it still uses the agent.
  bool threads_left() const { return threads_left_; }

  // NodeRole
  bool done() const override { return state_ == State::kDone; }
  Trainer* trainer() override { return trainer_.get(); }
  CheckpointSource* checkpoints() override { return checkpoints_; }
  void Turn(Clock::MonoTime now, TurnNews news) override;

 private:
  // kStopping: the round is left and the trainer was asked to stop; the
  // loop goes on until it has, or until its grace is over.
  // kJoining: the node's part is being restored on a thread; the trainer
  // starts once it is (kInRound).
  enum class State { kWaiting, kJoining, kInRound, kEnding, kStopping, kDone };

  Status Setup();
  // What the start reads from the store before the node joins: whether the
  // job is complete, and CheckGroupStart's verdict.
  struct StartRead {
    bool complete = false;
    Status check;
    // checkpoint_cadence auto: the job's interruptions, for the MTBF.
    std::optional<StatusOr<InterruptionHistory>> history;
  };
  // Reads it off the loop's thread while `watch` reads the stop signals and
  // the metadata service, as one node's start does (docs/design.md §14,
  // "Start"); nullopt once a stop signal or a notice came first.
  std::optional<StartRead> ReadStart(StartWatch& watch);
  // Exit 75, nothing changed, after a stop or notice during ReadStart.
  AgentResult StoppedAtStart(const StartWatch& watch);
  static std::string_view GroupPhaseName(State state);
  // The exit event's reason: "complete", "notice", "signal", "failed", "none".
  std::string_view ExitReason() const;
  // True once per stop signal (SIGTERM, SIGINT) read since the last call.
  bool TakeStopSignal() { return shell_.TakeStopSignal(trainer_.get()); }
  // Waits up to a tick for a signal or a checkpoint file (ports.idle in tests).
  void Idle() { shell_.Idle(checkpoints_); }
  // Sorts what the turn read (the start's events first); it goes to TakeNews.
  void Watch(Clock::MonoTime now, TurnNews news);
  // On a notice or a stop signal, at once: writes the notice file (the
  // notice's, or a request's saying `why` when `notice` is null) and sends
  // checkpoint_signal to the trainer; sets the deadline the exit keeps.
  void Act(const std::string& why, Clock::MonoTime deadline, const InterruptionEvent* notice);
  // Stops the trainer and ends the work still running, within kExitBound.
  AgentResult End();
  // The exit's wait for the part's upload and restore, until `until`; true
  // when the upload still runs (a restore left sets restore_left_).
  bool EndTransfers(Clock::MonoTime until);
  // Delivers the store calls' results until none is pending or `until`;
  // true when none is.
  bool DeliverUntil(LoopCalls& calls, Clock::MonoTime until);
  void Beat(Clock::MonoTime now);
  void KeepLease(Clock::MonoTime now);
  // Posts a look (ReadView) when one is due and none is under way.
  void Look(Clock::MonoTime now);
  // Off the loop: what the loop needs to read for `view`'s state and round
  // (`ending`: the round is ending on this node).
  GroupView ReadView(GroupView view, bool ending);
  // On the loop: acts on a look's result, unless the state or round it was
  // read for has passed.
  void TakeView(Clock::MonoTime now, GroupView& view);

  void TakeLease(const LeaseState& lease);
  // What the node is doing, for the policy.
  GroupFacts Facts() const;
  // Performs the policy's actions in order (agent/group/group_perform.cc);
  // Post posts the store writes among them.
  void Perform(GroupActions actions);
  void Do(const GroupAction& action);
  void Post(const GroupAction& action);
  // Posts a store write whose failure is logged, naming `what`.
  void Write(std::function<Status()> call, std::string what);
  // Posts the end record of the round this node is in.
  void EndRound(RoundEnd end);
  // Posts the removal of this member's record.
  void LeaveMembership();
  // Retention, `keep` whole group snapshots (docs/multi-node.md), off the
  // loop and apart from its calls: deleting many parts must not hold the
  // heartbeats and the lease for longer than group.timeout.
  void Retain();
  // Joins `plan`'s round: restores `group`'s part (none: starts fresh).
  void Join(const RoundPlan& plan, const std::optional<GroupCommit>& group);
  void Joining();
  void RestoreFailed(const Status& st);
  // Starts the round's trainer from `resume` ("" fresh): kInRound.
  void StartTrainer(const std::string& resume);
  void InRound(Clock::MonoTime now);
  // `asked_at`: Act asked the trainer for its checkpoint then (on this
  // node's notice or stop signal); it is not asked again.
  void BeginEnding(Clock::MonoTime now, Clock::MonoTime deadline, bool noticed,
                   std::optional<Clock::WallTime> asked_at = std::nullopt);
  // Acts on what Watch read: a stop signal, notices, rebalances.
  void TakeNews(Clock::MonoTime now, const News& news);
  // A rebalance recommendation (on_rebalance: snapshot) asks the trainer for
  // a checkpoint and uploads it at once; the round goes on.
  void TakeRebalance(Clock::MonoTime now, const InterruptionEvent& e);
  // Another rank's warning, as the round's flush records say (`flushes`:
  // rank -> its step then): this node's trainer is asked too, once per rank
  // and round, and its next checkpoint goes up at once.
  void TakeFlushes(Clock::MonoTime now, const std::map<int, std::optional<int64_t>>& flushes);
  // checkpoint_cadence auto (agent/group/group_cadence.cc): each turn in a
  // round; a warning on this node or another member; a part stored; the
  // history read at start.
  void CadenceTick(Clock::MonoTime now);
  void CadenceRebalance(Clock::MonoTime now, const std::string& why);
  void CadenceStored(int64_t step);
  void CadenceLearn(const std::optional<StatusOr<InterruptionHistory>>& history);
  void AnnounceCadence(Clock::MonoTime now, const std::string& why);  // a change, logged and recorded
  // systemd (docs/design.md §14): READY=1 once the first round's part is
  // restored and its trainer started, STOPPING=1 once this node leaves for
  // good; each said once.
  void SayReady() { shell_.SayReady(); }
  void SayStopping() { shell_.SayStopping(); }
  // checkpoint_signal to the trainer, where CheckpointSignalTarget says.
  void AskTrainer(const std::string& why);
  void Ending(Clock::MonoTime now);
  // Leaves the round: asks the trainer to stop (kStopping) and cancels the
  // upload under way, without blocking the loop.
  void LeaveRound(const std::string& why);
  void Stopping(Clock::MonoTime now);
  void FinishLeaving();
  // The complete local checkpoints, newest first, without those left from
  // before the round (FromBeforeTheRound).
  StatusOr<std::vector<Checkpoint>> RoundCheckpoints();
  // The size of this node's newest checkpoint of the round (0 without one).
  uint64_t NewestPartBytes();
  // A checkpoint of the round newer than the request (asked_after_) exists.
  bool TrainerAnswered();
  // Starts the upload of the part ChooseUpload picks, if any.
  void UploadPart(Clock::MonoTime now);
  void TakeUploadResult();
  StatusOr<SnapshotResult> WritePart(const Checkpoint& checkpoint,
                                      const std::atomic<bool>* cancel);
  // The job is complete: exit 0, on_complete on this node at the exit.
  void JobComplete();
  void Exit(int code);
  // A failure is logged, naming `what`.
  static void Noted(const Status& st, std::string_view what);
  // The ledger's event `kind` (docs/operations.md, "The ledger"). Once this
  // node is on its way out (a notice or a stop signal) it is kept, with its
  // time, and written once the trainer is stopped (FlushEvents), as one
  // node's agent defers them (docs/design.md §9): no PUT stands between the
  // notice and the round's end.
  void Event(std::string_view kind, nlohmann::ordered_json details = {},
             std::optional<Clock::WallTime> at = std::nullopt);
  // The instance's prices, read once off the loop as one node's agent reads
  // them (agent/run/instance_prices.h); the `prices` event once they end.
  void TakePrices(std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  void FlushEvents();

  const AgentContext& c_;
  const Config& cfg_;
  NodeShell shell_{c_};
  GroupStore group_;
  EventLog events_;
  LeaseKeeper lease_;
  const std::string notice_file_;
  ProcessTrainerLauncher launcher_;
  // The trainers' launcher: the ports' when given, else launcher_.
  TrainerLauncher& trainers_ = c_.ports.trainer ? *c_.ports.trainer : launcher_;
  ThreadUploader uploader_;
  LazyAutoScaling autoscaling_;
  AutoScalingApi& asg_ = c_.ports.autoscaling ? *c_.ports.autoscaling : autoscaling_;
  const SignalTarget signal_target_;
  std::unique_ptr<CheckpointSource> own_checkpoints_;
  CheckpointSource* checkpoints_ = nullptr;
  std::string staging_root_;
  // The store calls of the loop, off it (see the top of this file).
  LoopCalls calls_{CallRunner(c_.ports)};
  bool look_busy_ = false, beat_busy_ = false, lease_busy_ = false, done_busy_ = false;
  bool announcing_ = false;  // a part's record is being written
  bool coordinating_ = false;    // the lease, as the calls last said
  uint64_t generation_ = 0;      // its generation then
  std::vector<InterruptionEvent> start_others_;  // read during the start, for the first Watch
  // Set by the first notice or stop signal (Act): when the trainer was
  // asked for its checkpoint, and the deadline the exit keeps.
  std::optional<Clock::WallTime> asked_at_;
  std::optional<Clock::MonoTime> deadline_;
  bool complete_ = false;  // the job is complete: on_complete at the exit

  MemberRecord self_;
  State state_ = State::kWaiting;
  std::optional<RoundPlan> plan_;  // the round this agent takes part in
  int rank_ = 0;
  std::unique_ptr<Trainer> trainer_;
  // kJoining: the restore of this node's part, off the loop.
  BackgroundCall<StatusOr<RestoreResult>> restore_{CallRunner(c_.ports)};
  std::optional<GroupCommit> restoring_;             // what it restores
  bool restore_left_ = false;                        // still running at the exit
  int attempt_ = 0;
  std::optional<int64_t> part_step_;       // of this node's newest stored part in the round
  std::optional<int64_t> restored_step_;   // of the part restored on joining the round
  std::optional<int64_t> uploading_step_;  // of the part being uploaded
  uint64_t uploading_round_ = 0;           // the round it was started in
  int upload_rank_ = 0;                    // the rank it uploads for (WritePart's)
  Clock::MonoTime stop_deadline_{};        // kStopping: SIGKILL then; {} otherwise
  std::vector<int64_t> uploaded_;          // steps uploaded (or tried) in the round
  std::vector<CheckpointMark> before_round_;  // complete when the round was joined
  std::vector<PartRecord> round_parts_;    // every rank's parts of the round, as last read
  std::optional<int64_t> group_step_;      // of the newest group snapshot, as last read
  Clock::MonoTime next_periodic_{};        // the next periodic upload (upload_interval)
  Clock::MonoTime next_checkpoint_signal_{};  // checkpoint_interval's next signal
  // checkpoint_cadence auto, in place of checkpoint_interval, as one node's
  // (agent/group/group_cadence.cc); it lives across the rounds.
  std::optional<CadenceSchedule> cadence_;
  std::optional<int64_t> cadence_after_;  // a part newer than this answers its request
  bool asked_ = false;                     // a checkpoint was asked for and not answered
  std::set<int> flushes_taken_;            // ranks whose flush this node acted on, this round
  std::optional<int64_t> answer_step_;     // the part that answers it
  bool final_ = false;                     // the round's request is answered (final.json)
  std::string stepless_warned_;           // a checkpoint without a step, said once
  bool trainer_done_ = false;            // exited 0; its last part is going up
  bool done_marked_ = false;
  // Ending a round on a notice
  bool noticed_ = false;  // this node got the notice (or SIGTERM): it exits then
  Clock::MonoTime ending_deadline_{};
  // A notice's budget for the trainer's answer (ComputeNoticeBudget): with
  // no checkpoint newer than the request by then, none could be uploaded
  // before the deadline, and the round is given up on.
  std::optional<Clock::MonoTime> answer_wait_until_;
  double part_rate_ = kDefaultUploadBytesPerSecond;  // bytes/s of the last part stored
  std::optional<int64_t> asked_after_;  // a part newer than this answers the request
  // The round protocol's decisions; made once this member's record is (Setup).
  std::optional<GroupPolicy> policy_;
  Clock::MonoTime next_beat_{}, next_look_{}, next_lease_{};
  std::optional<int> exit_code_;
  struct DeferredEvent {
    std::string kind;
    nlohmann::ordered_json details;
    Clock::WallTime at;
  };
  std::vector<DeferredEvent> deferred_events_;
  bool defer_events_ = false;  // set by a notice or a stop signal
  // The opt-in metrics file (metrics_file), as one node's agent writes it;
  // its phases are the group states' (GroupPhaseName).
  MetricsFile metrics_{cfg_.metrics_file, cfg_.job, events_.attempt_id()};
  bool lifecycle_due_ = false;             // a notice: the hook's CONTINUE after the stop
  bool notice_read_ = false;               // a notice came (the exit's reason)
  // The node's logs (docs/design.md §13); the attempt a segment is shipped
  // under is the round.
  JobLogs logs_{cfg_, c_.store, c_.clock, c_.instance, c_.ports.inline_store_work};
  uint64_t log_round_ = 0;  // the round of the newest one joined
  // Retention, off the loop (the coordinator's); one run at a time, on a
  // queue of its own so that the loop's calls do not wait behind it.
  LoopCalls store_work_{CallRunner(c_.ports)};
  std::shared_ptr<std::atomic<bool>> retention_running_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<bool>> retention_wanted_ = std::make_shared<std::atomic<bool>>(false);
  bool threads_left_ = false;
  AgentResult result_;
};

}  // namespace sg::group_detail
