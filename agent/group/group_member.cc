// A member's side of the round protocol (docs/design.md §14): joining a
// round (restore and the trainer), part uploads, ending a round.
#include "agent/group/group_agent_impl.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>

#include "agent/detect/capture.h"
#include "agent/ledger/events.h"
#include "agent/config/exit_codes.h"
#include "agent/repo/group_protocol.h"
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
#include "agent/repo/store_layout.h"
#include "agent/trainer/supervisor.h"
#include "agent/trainer/trainer_record.h"
#include "common/autoscaling_client.h"
#include "common/files.h"
#include "common/log.h"
#include "common/signal_names.h"

namespace sg::group_detail {

void GroupAgent::Join(const RoundPlan& plan) {
  rank_ = *plan.RankOf(self_.agent);
  events_.SetNode(rank_);  // the ledger's lane (docs/operations.md)
  Event("group-joined", {{"round", plan.round}});  // the wait for the group ends
  plan_ = plan;
  part_step_.reset();
  restored_step_.reset();
  watch_->SetRound(plan.round);
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
  auto groups = group_.Groups();
  std::optional<GroupCommit> group;
  if (groups.ok()) {
    for (const GroupCommit& g : *groups) {
      if (g.seq == *plan.resume_seq) group = g;
    }
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
    return RestoreGroupPart(c_.store, cfg_.job, cfg_.preset, group, rank, cfg_.checkpoint_dir,
                            options);
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
  Noted(group_.EndRound(plan_->round, RoundEnd{"restore", c_.instance, st.message()}),
        "ending the round");
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
    Noted(group_.EndRound(plan.round, RoundEnd{"crash", c_.instance, trainer.status().message()}),
          "ending the round");
    LeaveRound("the trainer did not start");
    return;
  }
  trainer_ = std::make_unique<SharedTrainer>(std::move(*trainer), trainer_slot_);
  state_ = State::kInRound;
  if (cfg_.checkpoint_interval) {
    next_checkpoint_signal_ = c_.clock.Monotonic() + *cfg_.checkpoint_interval;
  }
  SayReady();
  (void)c_.notifier.Notify("STATUS=training: round " + std::to_string(plan.round) + ", rank " +
                           std::to_string(rank_));
  LogInfo("round {}: rank {} of {}, master {}:{}", plan.round, rank_, plan.nodes,
          placement.addresses.front(), plan.port);
}

StatusOr<std::vector<Checkpoint>> GroupAgent::RoundCheckpoints() {
  SG_ASSIGN_OR_RETURN(std::vector<Checkpoint> all, checkpoints_->Complete());
  std::erase_if(all, [&](const Checkpoint& c) { return FromBeforeTheRound(c, before_round_); });
  return all;
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
  request.job = PartJob(cfg_.job, upload_rank_);
  request.preset = std::string(PresetName(cfg_.preset));
  request.instance = c_.instance;
  request.cancel = cancel;
  SnapshotOptions options = SnapshotOptionsOf(cfg_);
  // Parts reference no frame of another part: group retention deletes a
  // part without looking for references into it (docs/design.md §14).
  options.reuse = false;
  SnapshotWriter writer(c_.store, c_.clock, options);
  return writer.Write(capture, request);
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
  PartRecord part{rank_, *uploading_step_, s.seq, c_.instance, s.bytes, s.stored_bytes};
  if (Status st = group_.AnnouncePart(plan_->round, part); !st.ok()) {
    LogWarn("announcing rank {}'s part failed: {}", rank_, st.message());
    return;
  }
  if (!part_step_ || part.step > *part_step_) part_step_ = part.step;
  if (answer_step_ == part.step) asked_ = false;  // answered
  LogInfo("rank {}'s part of step {} is stored ({} bytes, {} stored) in {:.1f} s", rank_,
          part.step, s.bytes, s.stored_bytes, r->seconds);
}

void GroupAgent::InRound(Clock::MonoTime now) {
  if (trainer_ && !trainer_done_) {
    if (auto ended = trainer_->Poll()) {
      if (ended->success()) {
        LogInfo("rank {}'s trainer finished", rank_);
        trainer_done_ = true;
      } else {
        LogWarn("rank {}'s trainer {}; ending round {}", rank_, ended->ToString(), plan_->round);
        Noted(group_.EndRound(plan_->round, RoundEnd{"crash", c_.instance, ended->ToString()}),
              "ending the round");
        LeaveRound("the trainer failed");
        return;
      }
    }
  }
  if (cfg_.checkpoint_interval && now >= next_checkpoint_signal_) {
    next_checkpoint_signal_ = now + *cfg_.checkpoint_interval;
    if (!trainer_done_) AskTrainer("checkpoint_interval");
  }
  TakeUploadResult();
  UploadPart(now);
  if (trainer_done_ && !done_marked_ && !uploader_.busy()) {
    // Its last checkpoint is stored (or it had none newer): this rank is
    // done. A file still settling may be that last checkpoint (a trainer
    // that saves and exits at once): it is waited for, as one node's agent
    // waits for it before the final snapshot.
    auto all = RoundCheckpoints();
    const bool newer_left = all.ok() && !all->empty() && all->front().step &&
                            (!part_step_ || *all->front().step > *part_step_);
    if (!newer_left && !checkpoints_->Writing() &&
        group_.MarkDone(plan_->round, rank_, part_step_).ok()) {
      done_marked_ = true;
    }
  }
}

void GroupAgent::BeginEnding(Clock::MonoTime now, Clock::MonoTime deadline, bool noticed,
                             std::optional<Clock::WallTime> asked_at) {
  state_ = State::kEnding;
  if (noticed && !noticed_) {
    // Leaving: the coordinator must not plan the next round with this node.
    Noted(group_.RemoveMember(self_.agent), "leaving the membership");
  }
  noticed_ = noticed_ || noticed;
  ending_deadline_ = deadline;
  // A part newer than every checkpoint there was when the trainer was asked
  // answers the request. The watch may have asked a while ago, while the
  // loop waited for the store: what was saved since then is the answer.
  auto all = RoundCheckpoints();
  asked_after_.reset();
  if (all.ok()) {
    for (const Checkpoint& c : *all) {
      if (asked_at && c.newest_mtime >= *asked_at) continue;
      if (c.step && (!asked_after_ || *c.step > *asked_after_)) asked_after_ = c.step;
      if (!asked_at) break;  // newest first
    }
  }
  const std::optional<int64_t> known = asked_at ? restored_step_ : part_step_;
  if (known && (!asked_after_ || *known > *asked_after_)) asked_after_ = known;
  asked_ = true;
  answer_step_.reset();
  final_ = false;
  if (Status st = group_.MarkAsked(plan_->round, rank_, asked_after_); !st.ok()) {
    LogWarn("recording the request failed: {}", st.message());
  }
  checkpoints_->SetUrgent(true);
  if (asked_at) return;  // the watch wrote the notice file and signalled the trainer
  const std::string why = noticed ? "the notice" : "the group's request";
  if (Status st = WriteNoticeFile(notice_file_, RequestFileJson(c_.clock.Now(), why, plan_->round));
      !st.ok()) {
    LogWarn("writing the notice file failed: {}", st.message());
  }
  AskTrainer(noticed ? "the notice" : "the group's request");
  (void)now;
}

void GroupAgent::Ending(Clock::MonoTime now) {
  if (trainer_ && !trainer_done_) {
    if (auto ended = trainer_->Poll()) trainer_done_ = ended->success();
  }
  TakeUploadResult();
  UploadPart(now);
  // Over once the coordinator has named the group snapshot that answers the
  // request (final_ is read every look), or at the deadline.
  const bool committed = final_;
  if (!committed && now < ending_deadline_) return;
  if (!committed) LogWarn("round {}: no group snapshot of the answer in time", plan_->round);
  (void)::unlink(notice_file_.c_str());
  checkpoints_->SetUrgent(false);
  if (noticed_) {
    Exit(committed ? kExitInterrupted : kExitNotCommitted);
    watch_->LoopStopsTrainer();
    if (trainer_) {
      if (auto stopped = trainer_->Stop(
              cfg_.stop_signal,
              duration_cast<milliseconds>(std::min<Duration>(cfg_.stop_grace, kMaxLeaveGrace)));
          stopped.ok()) {
        LogInfo("the trainer stopped: {}", stopped->ToString());
      }
      trainer_.reset();
    }
    Event("stop", {{"round", plan_->round}, {"committed", committed}});
    return;
  }
  LeaveRound("waiting for the next round");
}

void GroupAgent::LeaveRound(const std::string& why) {
  LogInfo("{}", why);
  // An upload still under way is the ended round's: TakeUploadResult drops
  // its result in the next round.
  if (uploader_.busy()) uploader_.Cancel();
  checkpoints_->SetUrgent(false);
  if (trainer_ && trainer_->running() && trainer_->Signal(cfg_.stop_signal).ok()) {
    // The loop goes on (heartbeats, the lease) while the trainer stops.
    stop_deadline_ = c_.clock.Monotonic() +
                     duration_cast<milliseconds>(std::min<Duration>(cfg_.stop_grace, kMaxLeaveGrace));
    state_ = State::kStopping;
    return;
  }
  FinishLeaving();
}

void GroupAgent::Stopping(Clock::MonoTime now) {
  // Done once the trainer and every process of its group are gone: workers
  // that outlive their launcher could still hold the port or write into the
  // checkpoint dir when the next round starts.
  std::optional<ExitStatus> ended = trainer_->Poll();
  if (ended && !trainer_->GroupLingers()) {
    LogInfo("the trainer stopped: {}", ended->ToString());
    FinishLeaving();
    return;
  }
  if (now < stop_deadline_) return;
  LogWarn("the trainer did not stop within its grace after {}", SignalName(cfg_.stop_signal));
  // SIGKILL to what is left of its process group.
  if (auto killed = trainer_->Stop(SIGKILL, milliseconds(0)); killed.ok()) {
    LogInfo("the trainer stopped: {}", killed->ToString());
  }
  FinishLeaving();
}

void GroupAgent::FinishLeaving() {
  stop_deadline_ = {};
  trainer_.reset();  // what it left in its group is finished off the loop (supervisor.h)
  state_ = State::kWaiting;
  plan_.reset();
  // A node on its way out whose round ended otherwise (a crash, a member
  // gone) before the answer was committed: nothing more to wait for.
  if (noticed_) Exit(final_ ? kExitInterrupted : kExitNotCommitted);
}

}  // namespace sg::group_detail
