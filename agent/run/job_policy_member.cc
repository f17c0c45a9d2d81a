// A group member's side of the node policy (docs/design.md §9, "A member's
// coordination"): joining a round, the trainer, part uploads and `done`.
// How a round ends on this node is job_policy_member_end.cc's.
#include <algorithm>
#include <map>

#include "agent/run/job_policy.h"
#include "agent/run/job_policy_detail.h"

namespace sg {

using namespace job_policy_detail;  // NOLINT(google-build-using-namespace)

JobActions JobPolicy::OnRoundJoined(PolicyTime t, uint64_t round, int rank) {
  if (!o_.member || phase_ != JobPhase::kLease) return {};
  phase_ = JobPhase::kRestore;
  round_.emplace();
  round_->round = round;
  round_->rank = rank;
  next_upload_ = t.mono + o_.upload_interval;
  return {};
}

JobActions JobPolicy::MemberRestored(PolicyTime t, const RestoredState& restored) {
  JobActions out;
  if (phase_ != JobPhase::kRestore || !round_) return out;
  phase_ = JobPhase::kTraining;
  round_->part_step = round_->restored_step = restored.committed_step;
  trainer_running_ = true;
  if (o_.checkpoint_interval) next_checkpoint_signal_ = t.mono + *o_.checkpoint_interval;
  out.push_back(job_action::StartTrainer{++attempt_, false});
  return out;
}

JobActions JobPolicy::OnRestoreFailed(PolicyTime t, const std::string& why) {
  JobActions out;
  if (!o_.member || phase_ != JobPhase::kRestore || !round_) return out;
  Say(out, Level::kError, Format("restoring rank {}'s part failed: {}", round_->rank, why));
  out.push_back(job_action::EndRound{"restore", why});
  LeaveRound(t, "the restore failed", out);
  return out;
}

JobActions JobPolicy::MemberStartFailed(PolicyTime t, const std::string& why) {
  JobActions out;
  trainer_running_ = false;
  if (phase_ != JobPhase::kTraining || !round_) return out;
  Say(out, Level::kError, Format("starting the trainer failed: {}", why));
  out.push_back(job_action::EndRound{"crash", why});
  LeaveRound(t, "the trainer did not start", out);
  return out;
}

JobActions JobPolicy::MemberTrainerExited(PolicyTime t, const ExitStatus& status,
                                          const std::optional<std::string>& unearned) {
  JobActions out;
  trainer_running_ = false;
  if (!round_) return out;
  MemberRound& r = *round_;
  if (phase_ == JobPhase::kFinalSnapshot) {
    r.trainer_done = status.success();
    return out;
  }
  if (phase_ != JobPhase::kTraining) return out;
  if (status.success() && !unearned) {
    // Its last checkpoint goes up (ChooseUpload's kLast), then `done`.
    Say(out, Level::kInfo, Format("rank {}'s trainer finished", r.rank));
    r.trainer_done = true;
    Event(t, "trainer-exit", {{"exit", status.ToString()}, {"round", r.round}}, out);
    return out;
  }
  if (unearned) {
    // As one node's: a crash, never complete; the group resumes from its
    // newest snapshot and counts it against restart.max.
    Say(out, Level::kWarn,
        Format("rank {}'s trainer {}: not complete (complete_when); handled as a crash, ending "
               "round {}",
               r.rank, *unearned, r.round));
    Event(t, "unearned", {{"why", *unearned}, {"round", r.round}}, out);
    out.push_back(job_action::EndRound{"unearned", *unearned});
    LeaveRound(t, "the trainer's exit 0 was not earned", out);
    return out;
  }
  // Not restarted alone: every node's trainer stops, and the next round
  // resumes the group from its newest snapshot.
  Say(out, Level::kWarn,
      Format("rank {}'s trainer {}; ending round {}", r.rank, status.ToString(), r.round));
  out.push_back(job_action::EndRound{"crash", status.ToString()});
  LeaveRound(t, "the trainer failed", out);
  return out;
}

JobActions JobPolicy::MemberTick(PolicyTime /*t*/) {
  // The round's work is decided on the listing (MemberCheckpoints).
  if (phase_ == JobPhase::kTraining || phase_ == JobPhase::kFinalSnapshot) {
    return {job_action::FindCheckpoints{}};
  }
  return {};
}

JobActions JobPolicy::MemberCheckpoints(PolicyTime t, const std::vector<Checkpoint>& newest_first,
                                        bool writing) {
  JobActions out;
  if (!round_) return out;
  round_->newest_step = newest_first.empty() ? std::nullopt : newest_first.front().step;
  if (phase_ == JobPhase::kFinalSnapshot) {
    if (round_->ask_pending) TakeAsk(t, newest_first, out);
    UploadPart(t, newest_first, out);
    DecideEnding(t, newest_first, out);
    return out;
  }
  if (phase_ != JobPhase::kTraining) return out;
  if (cadence_) {
    MemberCadenceTick(t, out);
  } else if (o_.checkpoint_interval && t.mono >= next_checkpoint_signal_) {
    next_checkpoint_signal_ = t.mono + *o_.checkpoint_interval;
    if (o_.checkpoint_signal && trainer_running_) {
      out.push_back(job_action::SignalTrainer{"checkpoint_interval"});
    }
  }
  UploadPart(t, newest_first, out);
  MarkDoneWhenStored(newest_first, writing, out);
  return out;
}

void JobPolicy::MemberCadenceTick(PolicyTime t, JobActions& out) {
  AnnounceCadence(t, cadence_->started() ? "C or the interruption rate changed" : "start", out);
  if (!cadence_->Due(t.mono) || round_->trainer_done || !trainer_running_) return;
  if (o_.checkpoint_signal) out.push_back(job_action::SignalTrainer{"checkpoint_cadence"});
  if (!cadence_->asking()) {
    // A part of a step newer than this answers it: C ends at its record.
    cadence_after_ = round_->newest_step;
    cadence_->Asked(t.mono, t.wall);
  }
  next_upload_ = t.mono;  // the answer goes up as soon as it is complete
}

void JobPolicy::UploadPart(PolicyTime t, const std::vector<Checkpoint>& newest_first,
                           JobActions& out) {
  if (upload_) return;  // one at a time, an ended round's included
  MemberRound& r = *round_;
  UploadInput in;
  in.rank = r.rank;
  std::map<int64_t, const Checkpoint*> by_step;
  for (const Checkpoint& c : newest_first) {
    if (!c.step) {
      if (&c == &newest_first.front() && c.id != stepless_warned_) {
        Say(out, Level::kWarn,
            Format("checkpoint {} names no step: a group snapshot joins the parts of one step, "
                   "so it is not uploaded (docs/multi-node.md)",
                   c.id));
        stepless_warned_ = c.id;
      }
      continue;
    }
    by_step.emplace(*c.step, &c);
    in.local_steps.push_back(*c.step);
  }
  in.uploaded = r.uploaded;
  in.parts = r.parts;
  in.committed_step = group_step_;
  in.asked = r.asked;
  in.asked_after = r.asked_after;
  in.trainer_done = r.trainer_done;
  in.periodic_due = phase_ == JobPhase::kTraining && t.mono >= next_upload_;
  std::optional<UploadChoice> choice = ChooseUpload(in);
  if (!choice) return;
  static constexpr const char* kWhy[] = {"to complete a group snapshot", "answering the request",
                                         "the last", "periodic"};
  Say(out, Level::kInfo,
      Format("uploading rank {}'s part of step {} ({})", r.rank, choice->step,
             kWhy[static_cast<int>(choice->reason)]));
  if (choice->reason == UploadReason::kPeriodic) next_upload_ = t.mono + o_.upload_interval;
  if (choice->reason == UploadReason::kAnswer) r.answer_step = choice->step;
  r.uploaded.push_back(choice->step);
  upload_ = Upload{*by_step.at(choice->step), false};
  upload_round_ = r.round;
  out.push_back(job_action::StartUpload{upload_->checkpoint, false});
}

void JobPolicy::MarkDoneWhenStored(const std::vector<Checkpoint>& newest_first, bool writing,
                                   JobActions& out) {
  MemberRound& r = *round_;
  if (!r.trainer_done || r.done_marked || r.done_busy || r.announcing || upload_) return;
  // Its last checkpoint is stored (or it had none newer): this rank is
  // done. A file still settling may be that last checkpoint (a trainer that
  // saves and exits at once): it is waited for, as one node's final
  // snapshot waits for it.
  const bool newer_left = !newest_first.empty() && newest_first.front().step &&
                          (!r.part_step || *newest_first.front().step > *r.part_step);
  if (newer_left || writing) return;
  r.done_busy = true;
  out.push_back(job_action::MarkDone{r.part_step});
}

JobActions JobPolicy::OnDoneMarked(PolicyTime /*t*/, uint64_t round, bool ok) {
  if (round_ && round_->round == round) {
    round_->done_busy = false;
    if (ok) round_->done_marked = true;
  }
  return {};
}

JobActions JobPolicy::MemberUploadFinished(PolicyTime /*t*/, const UploadOutcome& outcome) {
  JobActions out;
  if (!upload_) return out;
  const Upload upload = std::move(*upload_);
  upload_.reset();
  const uint64_t round = std::exchange(upload_round_, std::nullopt).value_or(0);
  if (!round_ || round_->round != round) {
    Say(out, Level::kDebug,
        Format("dropping the result of an upload of round {}, which ended", round));
    return out;
  }
  MemberRound& r = *round_;
  const int64_t step = upload.checkpoint.step.value_or(0);
  if (outcome.kind != UploadOutcome::Kind::kCommitted) {
    Say(out, Level::kWarn,
        Format("uploading rank {}'s part of step {} failed: {}", r.rank, step, outcome.message));
    // A failed answer is tried again (with what is newest then); a failed
    // periodic part waits for the next period.
    if (r.answer_step == step) r.answer_step.reset();
    std::erase(r.uploaded, step);
    return out;
  }
  r.announcing = true;
  out.push_back(job_action::AnnouncePart{
      step, outcome.seq, outcome.bytes, outcome.stored_bytes,
      outcome.stored_bytes - std::min(outcome.reused_bytes, outcome.stored_bytes),
      outcome.seconds});
  return out;
}

JobActions JobPolicy::OnPartAnnounced(PolicyTime t, uint64_t round,
                                      const job_action::AnnouncePart& part, bool ok) {
  if (round_ && round_->round == round) round_->announcing = false;
  if (!ok) return {};
  // The rate a notice's budget counts with: of what went over the wire, as
  // one node's (reused frames cost no upload time).
  if (part.seconds > 0.05 && part.fresh > 0) {
    upload_rate_ = static_cast<double>(part.fresh) / part.seconds;
  }
  if (!round_ || round_->round != round) return {};  // the round ended meanwhile
  MemberRound& r = *round_;
  if (!r.part_step || part.step > *r.part_step) r.part_step = part.step;
  if (cadence_ && cadence_->asking() && (!cadence_after_ || part.step > *cadence_after_)) {
    cadence_->Answered(t.mono);
  }
  if (r.answer_step == part.step) r.asked = false;  // answered
  return {};
}

JobActions JobPolicy::OnRoundRead(PolicyTime t, const RoundNews& news) {
  JobActions out;
  if (news.group_step) group_step_ = news.group_step;
  if (!round_) return out;
  if (news.parts) round_->parts = *news.parts;
  if (phase_ == JobPhase::kTraining) TakeFlushes(t, news.flushes, out);
  if (phase_ == JobPhase::kFinalSnapshot && news.answered) round_->answered = true;
  return out;
}

void JobPolicy::TakeFlushes(PolicyTime t, const std::map<int, std::optional<int64_t>>& flushes,
                            JobActions& out) {
  for (const auto& [rank, step] : flushes) {
    if (!round_->flushes_taken.insert(rank).second) continue;
    const std::string who = "rank " + std::to_string(rank) + "'s rebalance recommendation";
    Say(out, Level::kInfo,
        Format("rank {} was warned (a rebalance recommendation, at step {}): the group flushes; "
               "asking this node's trainer for a checkpoint",
               rank, step ? std::to_string(*step) : "none"));
    if (o_.checkpoint_signal && trainer_running_) out.push_back(job_action::SignalTrainer{who});
    CadenceWarned(t, who, out);
    next_upload_ = t.mono;
  }
}

}  // namespace sg
