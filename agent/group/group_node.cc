// A member's node side (docs/design.md §9, "A member's coordination"):
// joining a round (the restore), and performing the node policy's actions
// (agent/run/job_policy.h in member mode decides): the trainer, part uploads,
// the notice file and the round's records this node writes.
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "agent/detect/capture.h"
#include "agent/detect/completion.h"
#include "agent/detect/presets.h"
#include "agent/group/group_agent_impl.h"
#include "agent/repo/group_restore.h"
#include "agent/repo/open_store.h"
#include "agent/repo/round_backups.h"
#include "agent/run/notice_file.h"
#include "agent/trainer/checkpoint_signal.h"
#include "common/log.h"
#include "common/signal_names.h"

namespace sg::group_detail {

void GroupAgent::Join(const RoundPlan& plan, const std::optional<GroupCommit>& group) {
  rank_ = *plan.RankOf(self_.agent);
  // The ledger's lane (docs/operations.md), set where the events are written.
  calls_.Post([this, rank = rank_] { events_.SetNode(rank); });
  Event("group-joined", {{"round", plan.round}});  // the wait for the group ends
  plan_ = plan;
  log_round_ = plan.round;
  checkpoints_->SetNodeRank(rank_);
  // Checkpoints of an earlier round that the group did not commit are not
  // this round's: the trainer passes their steps again and rewrites them.
  // Noted before the restore, which swaps the directory (files restore does
  // not replace keep their mtimes) and leaves the watcher without a listing
  // until it watches the new one.
  before_round_.clear();
  if (auto before = checkpoints_->Complete(); before.ok()) {
    for (const Checkpoint& ck : *before) before_round_.push_back(CheckpointMark::Of(ck));
  }
  PerformNode(node_.OnRoundJoined(Now(), plan.round, rank_));
  resume_.clear();
  if (!plan.resume_seq) {
    PerformNode(node_.OnRestored(Now(), RestoredState{}));
    return;
  }
  if (!group) {
    PerformNode(node_.OnRestoreFailed(
        Now(), "group snapshot " + SeqName(*plan.resume_seq) + " cannot be read"));
    return;
  }
  // The restore runs on a thread of its own: a large part takes longer than
  // group.timeout, and the loop beats meanwhile (kRestore).
  restoring_ = *group;
  LogInfo("restoring rank {}'s part of group snapshot {} (step {})", rank_, SeqName(group->seq),
          group->step);
  Event("restore-start");
  restore_.Start([this, group = *group, rank = rank_] {
    RestoreOptions options;
    options.replace_foreign = true;  // the trainer's own files of a step the group did not commit
    auto r = RestoreGroupPart(c_.store, cfg_.job, cfg_.preset, group, rank, cfg_.checkpoint_dir,
                              options);
    // On the restore's thread: removing a large backup takes a while.
    if (r.ok() && !r->backup_dir.empty()) {
      KeepFewAgentBackups(cfg_.checkpoint_dir, r->backup_dir,
                          "made by rank " + std::to_string(rank) + "'s restore of group snapshot " +
                              SeqName(group.seq),
                          cfg_.backups_keep);
    }
    return r;
  });
}

void GroupAgent::Joining() {
  std::optional<StatusOr<RestoreResult>> restored = restore_.Poll();
  if (!restored) return;
  if (!restored->ok()) {
    PerformNode(node_.OnRestoreFailed(Now(), std::string(restored->status().message())));
    return;
  }
  Event("restore-end");
  LogInfo("restored rank {}'s part of group snapshot {} (step {})", rank_,
          SeqName(restoring_->seq), restoring_->step);
  resume_ = (*restored)->resume_path;
  RestoredState state;
  state.committed_step = restoring_->step;
  PerformNode(node_.OnRestored(Now(), state));
}

void GroupAgent::PerformNode(JobActions actions) {
  PerformInOrder(
      std::move(actions), [this](const JobAction& action) { return DoNode(action); },
      [this] { return exit_code_.has_value(); });
}

JobActions GroupAgent::DoNode(const JobAction& action) {
  namespace a = job_action;
  if (const auto* log = std::get_if<a::Log>(&action)) {
    WriteToLog(*log);
  } else if (const auto* notify = std::get_if<a::Notify>(&action)) {
    if (notify->state == "STOPPING=1") SayStopping();
  } else if (const auto* start = std::get_if<a::StartTrainer>(&action)) {
    return StartTrainer(*start);
  } else if (const auto* ask = std::get_if<a::SignalTrainer>(&action)) {
    AskTrainer(ask->why);
  } else if (std::holds_alternative<a::FindCheckpoints>(action)) {
    return FindCheckpoints();
  } else if (const auto* upload = std::get_if<a::StartUpload>(&action)) {
    upload_rank_ = rank_;  // read by WritePart on the upload's thread
    uploader_.Start(upload->checkpoint);
  } else if (std::holds_alternative<a::CancelUpload>(action)) {
    if (uploader_.busy()) uploader_.Cancel();
  } else if (const auto* file = std::get_if<a::WriteNoticeFile>(&action)) {
    if (Status st = WriteNoticeFile(
            notice_file_, NoticeOrRequestJson(file->event, file->why, file->round, c_.clock.Now()));
        !st.ok()) {
      LogWarn("writing the notice file failed: {}", st.message());
    }
  } else if (std::holds_alternative<a::RemoveNoticeFile>(action)) {
    (void)::unlink(notice_file_.c_str());
  } else if (const auto* stop = std::get_if<a::StopTrainer>(&action)) {
    return StopTrainer(*stop);
  } else if (const auto* event = std::get_if<a::RecordEvent>(&action)) {
    Event(event->kind, event->data, event->at);
  } else if (const auto* exit = std::get_if<a::Exit>(&action)) {
    Exit(exit->code);
  } else if (std::holds_alternative<a::RoundLeft>(action)) {
    trainer_.reset();  // what it left in its group is finished off the loop (supervisor.h)
    plan_.reset();
    checkpoints_->SetUrgent(false);
  } else {
    PostNode(action);
  }
  return {};
}

void GroupAgent::PostNode(const JobAction& action) {
  namespace a = job_action;
  const uint64_t round = plan_->round;
  if (const auto* end = std::get_if<a::EndRound>(&action)) {
    EndRound(RoundEnd{end->why, c_.instance, end->detail});
  } else if (std::holds_alternative<a::LeaveGroup>(action)) {
    LeaveMembership();
  } else if (const auto* asked = std::get_if<a::MarkAsked>(&action)) {
    Write([this, round, rank = rank_, after = asked->after] {
      return group_.MarkAsked(round, rank, after);
    },
          "recording the request");
  } else if (const auto* flush = std::get_if<a::MarkFlush>(&action)) {
    // The group flushes together: the other members read this record on
    // their next look and ask their own trainers, for trainers that do not
    // pass one rank's request on to the others.
    Write([this, round, rank = rank_, step = flush->step] {
      return group_.MarkFlush(round, rank, step);
    },
          "recording the group flush of round " + std::to_string(round));
  } else if (const auto* done = std::get_if<a::MarkDone>(&action)) {
    calls_.Post<Status>(
        [this, round, rank = rank_, step = done->step] { return group_.MarkDone(round, rank, step); },
        [this, round](Status& st) {
          Noted(st, "recording that this rank is done");
          PerformNode(node_.OnDoneMarked(Now(), round, st.ok()));
        });
  } else if (const auto* part = std::get_if<a::AnnouncePart>(&action)) {
    Announce(round, *part);
  }
}

void GroupAgent::Announce(uint64_t round, const job_action::AnnouncePart& p) {
  const PartRecord part{rank_, p.step, p.seq, c_.instance, p.bytes, p.stored};
  calls_.Post<Status>([this, round, part] { return group_.AnnouncePart(round, part); },
                      [this, round, p, rank = rank_](Status& st) {
                        if (!st.ok()) {
                          LogWarn("announcing rank {}'s part failed: {}", rank, st.message());
                        } else {
                          LogInfo("rank {}'s part of step {} is stored ({} bytes, {} stored) in "
                                  "{:.1f} s",
                                  rank, p.step, p.bytes, p.stored, p.seconds);
                          metrics_.AddBytes(p.fresh, p.stored - std::min(p.fresh, p.stored));
                        }
                        PerformNode(node_.OnPartAnnounced(Now(), round, p, st.ok()));
                      });
}

JobActions GroupAgent::StartTrainer(const job_action::StartTrainer& start) {
  const RoundPlan& plan = *plan_;
  GroupPlacement placement;
  placement.round = plan.round;
  placement.rank = rank_;
  placement.port = plan.port;
  for (const PlanMember& m : plan.members) placement.addresses.push_back(m.address);
  auto trainer = trainers_.Start(TrainerLaunch{resume_, start.attempt, placement});
  if (!trainer.ok()) return node_.OnTrainerStartFailed(Now(), trainer.status().message());
  Event("trainer-start", {{"round", plan.round}});
  trainer_ = std::move(*trainer);
  exit_told_ = false;
  SayReady();
  shell_.SayStatus("training: round " + std::to_string(plan.round) + ", rank " +
                   std::to_string(rank_));
  LogInfo("round {}: rank {} of {}, master {}:{}", plan.round, rank_, plan.nodes,
          placement.addresses.front(), plan.port);
  return {};
}

JobActions GroupAgent::FindCheckpoints() {
  // Once the round is ending, what the trainer wrote is taken as soon as it
  // is closed and quiet, not after the whole settle time.
  checkpoints_->SetUrgent(node_.phase() == JobPhase::kFinalSnapshot);
  auto all = RoundCheckpoints();
  if (!all.ok()) return node_.OnCheckpoints(Now(), {}, std::nullopt);
  return node_.OnCheckpoints(Now(), *all, checkpoints_->NextSettle(), checkpoints_->Writing());
}

JobActions GroupAgent::StopTrainer(const job_action::StopTrainer& stop) {
  if (stop.in_background && trainer_ && trainer_->running() &&
      trainer_->Signal(cfg_.stop_signal).ok()) {
    // The loop goes on (heartbeats, the lease) while it stops (Stopping).
    stop_deadline_ = c_.clock.Monotonic() + stop.grace;
    return {};
  }
  if (!stop.in_background && trainer_) {
    if (auto stopped = trainer_->Stop(cfg_.stop_signal, stop.grace); stopped.ok()) {
      LogInfo("the trainer stopped: {}", stopped->ToString());
    }
    trainer_.reset();
  }
  return node_.OnTrainerStopped(Now());
}

void GroupAgent::Stopping(Clock::MonoTime now) {
  // Done once the trainer and every process of its group are gone: workers
  // that outlive their launcher could still hold the port or write into the
  // checkpoint dir when the next round starts.
  std::optional<ExitStatus> ended = trainer_->Poll();
  if (ended && !trainer_->GroupLingers()) {
    LogInfo("the trainer stopped: {}", ended->ToString());
  } else if (now < stop_deadline_) {
    return;
  } else {
    LogWarn("the trainer did not stop within its grace after {}", SignalName(cfg_.stop_signal));
    // SIGKILL to what is left of its process group.
    if (auto killed = trainer_->Stop(SIGKILL, milliseconds(0)); killed.ok()) {
      LogInfo("the trainer stopped: {}", killed->ToString());
    }
  }
  stop_deadline_ = {};
  PerformNode(node_.OnTrainerStopped(Now()));
}

void GroupAgent::PollTrainer() {
  if (!trainer_ || exit_told_) return;
  std::optional<ExitStatus> ended = trainer_->Poll();
  if (!ended) return;
  exit_told_ = true;
  const std::optional<std::string> unearned =
      ended->success() && cfg_.complete_when && node_.phase() == JobPhase::kTraining
          ? UnearnedExit(*cfg_.complete_when, cfg_.checkpoint_dir)
          : std::nullopt;
  PerformNode(node_.OnTrainerExited(Now(), *ended, unearned));
}

void GroupAgent::PollUpload() {
  if (!uploader_.busy()) return;
  auto r = uploader_.Poll();
  if (!r) return;
  UploadOutcome outcome;
  if (r->result.ok()) {
    outcome.seq = r->result->seq;
    outcome.bytes = r->result->bytes;
    outcome.stored_bytes = r->result->stored_bytes;
    outcome.reused_bytes = r->result->reused_bytes;
    outcome.seconds = r->seconds;
  } else {
    outcome.kind = UploadOutcome::Kind::kFailed;
    outcome.message = std::string(r->result.status().message());
  }
  PerformNode(node_.OnUploadFinished(Now(), outcome));
}

StatusOr<std::vector<Checkpoint>> GroupAgent::RoundCheckpoints() {
  SG_ASSIGN_OR_RETURN(std::vector<Checkpoint> all, checkpoints_->Complete());
  std::erase_if(all, [&](const Checkpoint& c) { return FromBeforeTheRound(c, before_round_); });
  return all;
}

uint64_t GroupAgent::NewestPartBytes() {
  auto all = RoundCheckpoints();
  if (!all.ok() || all->empty()) return 0;
  return CheckpointBytes(cfg_.checkpoint_dir, all->front());
}

StatusOr<SnapshotResult> GroupAgent::WritePart(const Checkpoint& checkpoint,
                                                const std::atomic<bool>* cancel) {
  SG_ASSIGN_OR_RETURN(CapturedCheckpoint capture,
                      CapturedCheckpoint::Capture(cfg_.checkpoint_dir, checkpoint, staging_root_));
  SnapshotRequest request;
  request.preset = std::string(PresetName(cfg_.preset));
  request.instance = c_.instance;
  request.cancel = cancel;
  // A part references the frames its rank's earlier parts stored (`reuse`):
  // group retention keeps every object a kept part references (docs/design.md
  // §14, "Retention").
  return Repository::Open(c_.store, cfg_.job)
      .Part(upload_rank_)
      .Write(c_.clock, SnapshotOptionsOf(cfg_), capture, request);
}

void GroupAgent::AskTrainer(const std::string& why) {
  if (!cfg_.checkpoint_signal || !trainer_ || !trainer_->running()) return;
  if (SendCheckpointSignal(*trainer_, *cfg_.checkpoint_signal, signal_target_).ok()) {
    LogInfo("asked the trainer{} for a checkpoint ({}) on {}",
            signal_target_ == SignalTarget::kWorkers ? "'s workers" : "",
            SignalName(*cfg_.checkpoint_signal), why);
  }
}

}  // namespace sg::group_detail
