// The class behind RunGroupAgent (agent/group/group_agent.h; docs/design.md §14),
// the group role of the one loop (agent/run/node_shell.h), shared by its
// files: group_agent.cc (setup, the member record, the lease),
// group_agent_run.cc (the run, the role's turn and the exit),
// group_news.cc (notices and stop signals), group_view.cc (reading the
// round), group_perform.cc (performing the group policy's actions:
// agent/group/group_policy.h decides), group_node.cc (joining a round and
// performing the node policy's actions: agent/run/job_policy.h, in member
// mode, decides the trainer, the parts and the round's end on this node)
// and group_duties.cc. Internal to those files.
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
#include "agent/run/job_policy.h"
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

// Where the loop's store calls run: the ports' runner, else on the caller's
// thread with inline_store_work, else a thread of their own.
inline LoopCalls::Runner CallRunner(const AgentPorts& ports) {
  if (ports.loop_calls) return ports.loop_calls;
  if (ports.inline_store_work) return [](std::function<void()> task) { task(); };
  return nullptr;
}

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
        signal_target_(CheckpointSignalTarget(cfg_.command)) {}

  AgentResult Run();
  // Work was left running at the exit (a store call, an upload, a restore,
  // retention, a log shipment): it still uses the agent.
  bool threads_left() const { return threads_left_; }

  // NodeRole
  bool done() const override { return exit_code_.has_value(); }
  Trainer* trainer() override { return trainer_.get(); }
  CheckpointSource* checkpoints() override { return checkpoints_; }
  void Turn(Clock::MonoTime now, TurnNews news) override;

 private:
  // The node policy's phase, kDone once the node exits (either policy's
  // exit): kLease waits for a round, kRestore restores this node's part on
  // a thread, kTraining is the round, kFinalSnapshot its end on a request,
  // kStopping leaving it while the loop goes on.
  JobPhase phase() const { return exit_code_ ? JobPhase::kDone : node_.phase(); }
  PolicyTime Now() const { return {c_.clock.Monotonic(), c_.clock.Now()}; }

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
  // The exit event's reason: "complete", "notice", "signal", "failed", "none".
  std::string_view ExitReason() const;
  // True once per stop signal (SIGTERM, SIGINT) read since the last call.
  bool TakeStopSignal() { return shell_.TakeStopSignal(trainer_.get()); }
  // Waits up to a tick for a signal or a checkpoint file (ports.idle in tests).
  void Idle() { shell_.Idle(checkpoints_); }
  // Hands what the turn read (the start's events first) to the node
  // policy; a notice or stop signal sets the deadline the exit keeps.
  void Watch(Clock::MonoTime now, TurnNews news);
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
  // Performs the node policy's actions in order (agent/group/group_node.cc);
  // those with an answer feed it straight back.
  void PerformNode(JobActions actions);
  JobActions DoNode(const JobAction& action);
  // Posts the round's records among them.
  void PostNode(const JobAction& action);
  void Announce(uint64_t round, const job_action::AnnouncePart& part);
  JobActions StartTrainer(const job_action::StartTrainer& start);
  JobActions FindCheckpoints();
  JobActions StopTrainer(const job_action::StopTrainer& stop);
  // A stop in the background (kStopping): SIGKILL at its grace's end.
  void Stopping(Clock::MonoTime now);
  void PollTrainer();
  void PollUpload();
  // checkpoint_signal to the trainer, where CheckpointSignalTarget says.
  void AskTrainer(const std::string& why);
  // systemd (docs/design.md §14): READY=1 once the first round's part is
  // restored and its trainer started, STOPPING=1 once this node leaves for
  // good; each said once.
  void SayReady() { shell_.SayReady(); }
  void SayStopping() { shell_.SayStopping(); }
  // The complete local checkpoints, newest first, without those left from
  // before the round (FromBeforeTheRound).
  StatusOr<std::vector<Checkpoint>> RoundCheckpoints();
  // The size of this node's newest checkpoint of the round (0 without one).
  uint64_t NewestPartBytes();
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
  bool look_busy_ = false, beat_busy_ = false, lease_busy_ = false;
  bool coordinating_ = false;    // the lease, as the calls last said
  uint64_t generation_ = 0;      // its generation then
  std::vector<InterruptionEvent> start_others_;  // read during the start, for the first Watch
  // Set by a notice or stop signal: the deadline the exit keeps.
  std::optional<Clock::MonoTime> deadline_;
  bool complete_ = false;  // the job is complete: on_complete at the exit

  MemberRecord self_;
  std::optional<RoundPlan> plan_;  // the round this agent takes part in
  int rank_ = 0;
  std::unique_ptr<Trainer> trainer_;
  bool exit_told_ = false;  // the trainer's exit went to the node policy
  std::string resume_;      // what the round's trainer starts from ("" fresh)
  // kRestore: the restore of this node's part, off the loop.
  BackgroundCall<StatusOr<RestoreResult>> restore_{CallRunner(c_.ports)};
  std::optional<GroupCommit> restoring_;             // what it restores
  bool restore_left_ = false;                        // still running at the exit
  int upload_rank_ = 0;                    // the rank it uploads for (WritePart's)
  Clock::MonoTime stop_deadline_{};        // kStopping: SIGKILL then; {} otherwise
  std::vector<CheckpointMark> before_round_;  // complete when the round was joined
  std::optional<int64_t> observed_step_;   // of the newest group snapshot the metrics saw
  // The node's side: its trainer, parts and the round's end on this node
  // (member mode), across the rounds.
  JobPolicy node_{JobPolicyOptions::FromConfig(cfg_)};
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
  // its phases are the node policy's.
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
