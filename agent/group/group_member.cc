// A member's side of the round protocol (docs/design.md §14): joining a
// round (restore and the trainer) and part uploads; ending a round is
// group_ending.cc's.
#include "agent/group/group_agent_impl.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>

#include "agent/detect/capture.h"
#include "agent/detect/completion.h"
#include "agent/ledger/events.h"
#include "agent/config/exit_codes.h"
#include "agent/repo/group_protocol.h"
#include "agent/repo/round_backups.h"
#include "agent/repo/group_restore.h"
#include "agent/repo/group_store.h"
#include "agent/run/job_end.h"
#include "agent/run/job_ports_real.h"
#include "agent/run/job_start.h"
#include "agent/run/notice_file.h"
#include "agent/repo/lease.h"
#include "agent/detect/presets.h"
#include "agent/repo/restorer.h"
#include "agent/repo/open_store.h"
#include "agent/repo/snapshot_writer.h"
#include "agent/repo/repository.h"
#include "agent/trainer/supervisor.h"
#include "agent/trainer/trainer_record.h"
#include "common/autoscaling_client.h"
#include "common/files.h"
#include "common/log.h"
#include "common/signal_names.h"

namespace sg::group_detail {

void GroupAgent::Join(const RoundPlan& plan, const std::optional<GroupCommit>& group) {
  rank_ = *plan.RankOf(self_.agent);
  // The ledger's lane (docs/operations.md), set where the events are written.
  calls_.Post([this, rank = rank_] { events_.SetNode(rank); });
  Event("group-joined", {{"round", plan.round}});  // the wait for the group ends
  plan_ = plan;
  part_step_.reset();
  restored_step_.reset();
  log_round_ = plan.round;
  uploading_step_.reset();
  uploaded_.clear();
  round_parts_.clear();
  asked_ = false;
  flushes_taken_.clear();
  answer_step_.reset();
  next_periodic_ = c_.clock.Monotonic() + cfg_.upload_interval;
  trainer_done_ = done_marked_ = false;
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
  if (!plan.resume_seq) {
    StartTrainer("");
    return;
  }
  if (!group) {
    RestoreFailed(Status::NotFound("group snapshot " + SeqName(*plan.resume_seq) +
                                   " cannot be read"));
    return;
  }
  // The restore runs on a thread of its own: a large part takes longer than
  // group.timeout, and the loop beats meanwhile (state kJoining).
  state_ = State::kJoining;
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
    RestoreFailed(restored->status());
    return;
  }
  part_step_ = restored_step_ = restoring_->step;
  Event("restore-end");
  LogInfo("restored rank {}'s part of group snapshot {} (step {})", rank_,
          SeqName(restoring_->seq), restoring_->step);
  StartTrainer((*restored)->resume_path);
}

void GroupAgent::RestoreFailed(const Status& st) {
  LogError("restoring rank {}'s part failed: {}", rank_, st.message());
  EndRound(RoundEnd{"restore", c_.instance, std::string(st.message())});
  LeaveRound("the restore failed");
}

void GroupAgent::StartTrainer(const std::string& resume) {
  const RoundPlan& plan = *plan_;
  GroupPlacement placement;
  placement.round = plan.round;
  placement.rank = rank_;
  placement.port = plan.port;
  for (const PlanMember& m : plan.members) placement.addresses.push_back(m.address);
  auto trainer = trainers_.Start(TrainerLaunch{resume, ++attempt_, placement});
  if (trainer.ok()) Event("trainer-start", {{"round", plan.round}});
  if (!trainer.ok()) {
    LogError("starting the trainer failed: {}", trainer.status().message());
    EndRound(RoundEnd{"crash", c_.instance, std::string(trainer.status().message())});
    LeaveRound("the trainer did not start");
    return;
  }
  trainer_ = std::move(*trainer);
  state_ = State::kInRound;
  if (cfg_.checkpoint_interval) {
    next_checkpoint_signal_ = c_.clock.Monotonic() + *cfg_.checkpoint_interval;
  }
  SayReady();
  shell_.SayStatus("training: round " + std::to_string(plan.round) + ", rank " +
                   std::to_string(rank_));
  LogInfo("round {}: rank {} of {}, master {}:{}", plan.round, rank_, plan.nodes,
          placement.addresses.front(), plan.port);
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

bool GroupAgent::TrainerAnswered() {
  auto all = RoundCheckpoints();
  if (!all.ok()) return false;
  return std::any_of(all->begin(), all->end(), [&](const Checkpoint& c) {
    return c.step && (!asked_after_ || *c.step > *asked_after_);
  });
}

void GroupAgent::UploadPart(Clock::MonoTime now) {
  if (uploader_.busy()) return;
  auto all = RoundCheckpoints();
  if (!all.ok()) return;
  UploadInput in;
  in.rank = rank_;
  std::map<int64_t, const Checkpoint*> by_step;
  for (const Checkpoint& c : *all) {
    if (!c.step) {
      if (&c == &all->front() && c.id != stepless_warned_) {
        LogWarn("checkpoint {} names no step: a group snapshot joins the parts of one step, so "
                "it is not uploaded (docs/multi-node.md)",
                c.id);
        stepless_warned_ = c.id;
      }
      continue;
    }
    by_step.emplace(*c.step, &c);
    in.local_steps.push_back(*c.step);
  }
  in.uploaded = uploaded_;
  in.parts = round_parts_;
  in.committed_step = group_step_;
  in.asked = asked_;
  in.asked_after = asked_after_;
  in.trainer_done = trainer_done_;
  in.periodic_due = state_ == State::kInRound && now >= next_periodic_;
  std::optional<UploadChoice> choice = ChooseUpload(in);
  if (!choice) return;
  static constexpr const char* kWhy[] = {"to complete a group snapshot", "answering the request",
                                         "the last", "periodic"};
  LogInfo("uploading rank {}'s part of step {} ({})", rank_, choice->step,
          kWhy[static_cast<int>(choice->reason)]);
  if (choice->reason == UploadReason::kPeriodic) next_periodic_ = now + cfg_.upload_interval;
  if (choice->reason == UploadReason::kAnswer) answer_step_ = choice->step;
  uploaded_.push_back(choice->step);
  uploading_step_ = choice->step;
  uploading_round_ = plan_->round;
  upload_rank_ = rank_;  // read by WritePart on the upload's thread
  uploader_.Start(*by_step.at(choice->step));
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

void GroupAgent::TakeUploadResult() {
  if (!uploader_.busy()) return;
  auto r = uploader_.Poll();
  if (!r) return;
  if (!plan_ || uploading_round_ != plan_->round) {
    LogDebug("dropping the result of an upload of round {}, which ended", uploading_round_);
    return;
  }
  if (!r->result.ok()) {
    LogWarn("uploading rank {}'s part of step {} failed: {}", rank_, *uploading_step_,
            r->result.status().message());
    // A failed answer is tried again (with what is newest then); a failed
    // periodic part waits for the next period.
    if (answer_step_ == uploading_step_) answer_step_.reset();
    std::erase(uploaded_, *uploading_step_);
    return;
  }
  const SnapshotResult& s = *r->result;
  const PartRecord part{rank_, *uploading_step_, s.seq, c_.instance, s.bytes, s.stored_bytes};
  const uint64_t round = plan_->round;
  announcing_ = true;
  calls_.Post<Status>(
      [this, round, part] { return group_.AnnouncePart(round, part); },
      [this, round, part, seconds = r->seconds,
       fresh = s.stored_bytes - std::min(s.reused_bytes, s.stored_bytes)](Status& st) {
        announcing_ = false;
        if (!st.ok()) {
          LogWarn("announcing rank {}'s part failed: {}", part.rank, st.message());
          return;
        }
        LogInfo("rank {}'s part of step {} is stored ({} bytes, {} stored) in {:.1f} s",
                part.rank, part.step, part.bytes, part.stored, seconds);
        // The rate a notice's budget counts with: of what went over the
        // wire, as one node's (reused frames cost no upload time).
        if (seconds > 0.05 && fresh > 0) part_rate_ = static_cast<double>(fresh) / seconds;
        metrics_.AddBytes(fresh, part.stored - std::min(fresh, part.stored));
        if (!plan_ || plan_->round != round) return;  // the round ended meanwhile
        if (!part_step_ || part.step > *part_step_) part_step_ = part.step;
        CadenceStored(part.step);
        if (answer_step_ == part.step) asked_ = false;  // answered
      });
}

void GroupAgent::InRound(Clock::MonoTime now) {
  if (trainer_ && !trainer_done_) {
    if (auto ended = trainer_->Poll()) {
      const std::optional<std::string> unearned =
          ended->success() && cfg_.complete_when
              ? UnearnedExit(*cfg_.complete_when, cfg_.checkpoint_dir)
              : std::nullopt;
      if (ended->success() && !unearned) {
        LogInfo("rank {}'s trainer finished", rank_);
        trainer_done_ = true;
        Event("trainer-exit", {{"exit", ended->ToString()}, {"round", plan_->round}});
      } else if (unearned) {
        // As one node's: a crash, restarted from the newest group snapshot
        // and counted against restart.max; never complete.
        LogWarn("rank {}'s trainer {}: not complete (complete_when); handled as a crash, ending "
                "round {}",
                rank_, *unearned, plan_->round);
        Event("unearned", {{"why", *unearned}, {"round", plan_->round}});
        EndRound(RoundEnd{"unearned", c_.instance, *unearned});
        LeaveRound("the trainer's exit 0 was not earned");
        return;
      } else {
        LogWarn("rank {}'s trainer {}; ending round {}", rank_, ended->ToString(), plan_->round);
        EndRound(RoundEnd{"crash", c_.instance, ended->ToString()});
        LeaveRound("the trainer failed");
        return;
      }
    }
  }
  if (cadence_) {
    CadenceTick(now);
  } else if (cfg_.checkpoint_interval && now >= next_checkpoint_signal_) {
    next_checkpoint_signal_ = now + *cfg_.checkpoint_interval;
    if (!trainer_done_) AskTrainer("checkpoint_interval");
  }
  TakeUploadResult();
  UploadPart(now);
  if (trainer_done_ && !done_marked_ && !done_busy_ && !announcing_ && !uploader_.busy()) {
    // Its last checkpoint is stored (or it had none newer): this rank is
    // done. A file still settling may be that last checkpoint (a trainer
    // that saves and exits at once): it is waited for, as one node's agent
    // waits for it before the final snapshot.
    auto all = RoundCheckpoints();
    const bool newer_left = all.ok() && !all->empty() && all->front().step &&
                            (!part_step_ || *all->front().step > *part_step_);
    if (!newer_left && !checkpoints_->Writing()) {
      done_busy_ = true;
      calls_.Post<Status>(
          [this, round = plan_->round, rank = rank_, step = part_step_] {
            return group_.MarkDone(round, rank, step);
          },
          [this, round = plan_->round](Status& st) {
            done_busy_ = false;
            Noted(st, "recording that this rank is done");
            if (st.ok() && plan_ && plan_->round == round) done_marked_ = true;
          });
    }
  }
}

}  // namespace sg::group_detail
