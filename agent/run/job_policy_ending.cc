// How the job policy ends a job (docs/design.md §9): the final-snapshot
// phase (wait for the trainer's checkpoint, upload the newest), the stop,
// a checkpoint written on the stop signal, a stop signal and a lost fence,
// and the exit.
#include <algorithm>

#include "agent/config/exit_codes.h"
#include "agent/run/job_policy.h"
#include "agent/run/job_policy_detail.h"
#include "agent/run/notice_budget.h"
#include "agent/repo/store_names.h"
#include "common/log.h"
#include "common/signal_names.h"

namespace sg {

using namespace job_policy_detail;  // NOLINT(google-build-using-namespace)

void JobPolicy::BeginFinal(PolicyTime t, JobEnd end, Clock::MonoTime until,
                           Clock::MonoTime hard_until, bool signal, JobActions& out) {
  phase_ = JobPhase::kFinalSnapshot;
  end_ = end;
  final_until_ = until;
  final_hard_until_ = std::max(until, hard_until);
  // A finished trainer's last checkpoint is tried again for stop_timeout
  // (no engine's kill is coming); a notice or SIGTERM sets its own bound.
  final_retry_until_ = t.mono + (end == JobEnd::kComplete
                                     ? o_.stop_timeout
                                     : std::min<milliseconds>(o_.stop_grace, seconds(60)));
  restart_at_.reset();  // a trainer waiting for its restart stays down
  if (upload_ && !upload_->final) {
    out.push_back(job_action::CancelUpload{});
    cancelled_until_ = t.mono + kCancelWait;
  }
  if ((until > t.mono || signal) && end != JobEnd::kComplete) {
    // A checkpoint finished after this moment answers the request (the
    // signal, or the notice file).
    asked_ = CheckpointMark{"", std::nullopt, t.wall};
    Event(t, "checkpoint-request", {{"signal", signal}}, out);
  }
  if (signal) {
    Say(out, Level::kInfo,
        Format("asking the trainer for a checkpoint ({})", SignalName(*o_.checkpoint_signal)));
    out.push_back(job_action::SignalTrainer{end == JobEnd::kNotice ? "the notice" : "SIGTERM"});
  }
}

void JobPolicy::DecideFinal(PolicyTime t, const std::vector<Checkpoint>& newest_first, bool writing,
                            JobActions& out) {
  const bool fresh = asked_ && !newest_first.empty() && IsNewerThan(newest_first.front(), *asked_);
  if (!fresh) {
    if (t.mono < final_until_) return;  // wait for the trainer's answer
    // A checkpoint being written is waited for while the budget allows.
    if (writing && t.mono < final_hard_until_) return;
  }
  if (asked_) {
    Event(t, "checkpoint-answer",
          {{"answered", fresh}, {"step", fresh ? OrNull(newest_first.front().step) : nullptr}},
          out);
    if (fresh) {
      Say(out, Level::kInfo, Format("the trainer wrote checkpoint {}", newest_first.front().id));
    } else {
      Say(out, Level::kWarn, "no new checkpoint in time; committing the newest existing one");
    }
    asked_.reset();
  }
  final_until_ = final_hard_until_ = t.mono;  // decided: a retry does not wait again
  if (!newest_first.empty()) seen_before_stop_ = CheckpointMark::Of(newest_first.front());
  std::optional<Checkpoint> target = FirstNewerThan(newest_first, committed_);
  if (!target) {
    Say(out, Level::kInfo,
        committed_ ? "the newest checkpoint is already committed"
                   : "no complete checkpoint to commit");
    Stop(t, out);
    return;
  }
  ++final_attempts_;
  StartFinalUpload(t, *target, out);
}

void JobPolicy::StartFinalUpload(PolicyTime t, const Checkpoint& target, JobActions& out) {
  // Before the stop, give up in time for the trainer to get its stop signal
  // 10 s before the deadline; after it, or when that has passed, 2 s before.
  // Without a deadline (the trainer finished) the upload is waited for.
  if (const std::optional<Clock::MonoTime> end_by = deadline()) {
    give_up_at_ = *end_by - kGiveUpBeforeStop;
    if (stopped_ || give_up_at_ <= t.mono) give_up_at_ = *end_by - kGiveUpLast;
  }
  upload_ = Upload{target, true};
  out.push_back(job_action::StartUpload{target, true});
}

void JobPolicy::GiveUpUpload(PolicyTime t, JobActions& out) {
  Say(out, Level::kError,
      Format("the upload of checkpoint {} did not finish before the deadline; the store does "
             "not answer. Giving up on it",
             upload_->checkpoint.id));
  out.push_back(job_action::CancelUpload{});
  upload_.reset();  // whatever it reports later is not waited for
  final_failed_ = true;
  gave_up_ = true;  // and no other upload starts while it may still run
  if (stopped_) {
    Finish(t, out);
  } else {
    Stop(t, out);
  }
}

void JobPolicy::Stop(PolicyTime t, JobActions& out) {
  if (end_ == JobEnd::kComplete) {
    out.push_back(job_action::WriteCompleteMarker{last_seq_, committed_step_});
    Exit(kExitOk, /*release_lease=*/true, out);
    // After the lease is released: scaling to zero must not wait on it.
    out.insert(out.end() - 1, job_action::PerformOnComplete{});
    return;
  }
  phase_ = JobPhase::kStopping;
  milliseconds grace = o_.stop_grace;
  if (end_ == JobEnd::kNotice) {
    // Stopped in time for the instance's end, five seconds in hand.
    const milliseconds left = left_ - duration_cast<milliseconds>(t.mono - notice_at_);
    grace = std::clamp<milliseconds>(left - seconds(5), milliseconds(0), o_.stop_grace);
  } else if (end_ == JobEnd::kFenced) {
    grace = std::min<milliseconds>(o_.stop_grace, seconds(10));
  } else if (end_ == JobEnd::kSignal && stop_deadline_) {
    // Stopped before the engine's kill, five seconds in hand.
    const milliseconds left = duration_cast<milliseconds>(*stop_deadline_ - t.mono);
    grace = std::clamp<milliseconds>(left - seconds(5), milliseconds(0), o_.stop_grace);
  }
  stopping_elapsed_ = seen_late_ + SecondsBetween(notice_at_, t.mono);
  out.push_back(job_action::StopTrainer{grace});
}

JobActions JobPolicy::OnTrainerStopped(PolicyTime t) {
  if (o_.member) return MemberTrainerStopped(t);
  JobActions out;
  if (phase_ != JobPhase::kStopping || stopped_) return out;
  trainer_running_ = false;
  stopped_ = true;
  Event(t, "trainer-stop", {}, out);
  if (end_ == JobEnd::kFenced) {
    out.push_back(job_action::RecordEvent{"fenced", {{"reason", fenced_why_}}, t.wall});
    Exit(kExitFenced, /*release_lease=*/false, out);
    return out;
  }
  // Many trainers save on the stop signal (Lightning, Hugging Face): what
  // they wrote goes up too, once it has settled, while time allows.
  after_stop_until_ = t.mono + o_.settle + kAfterExitSlack;
  if (const std::optional<Clock::MonoTime> end_by = deadline()) {
    after_stop_until_ = std::min(after_stop_until_, *end_by - kNoticeSafety);
  }
  out.push_back(job_action::FindCheckpoints{});
  return out;
}

void JobPolicy::AfterStop(PolicyTime t, const std::vector<Checkpoint>& newest_first, bool writing,
                          JobActions& out) {
  const bool time_left = t.mono < after_stop_until_;
  if (writing && time_left) return;  // it is still settling
  // Only what was written after the final decision: a checkpoint the final
  // upload already tried is not tried again here.
  std::optional<Checkpoint> target = FirstNewerThan(newest_first, committed_);
  if (target && seen_before_stop_ && !IsNewerThan(*target, *seen_before_stop_)) target.reset();
  const std::optional<Clock::MonoTime> end_by = deadline();
  const bool may_upload = !end_by || t.mono < *end_by - kNoticeSafety / 3;
  if (target && (!may_upload || gave_up_)) {
    final_failed_ = true;  // what it saved is newer than the store's
    target.reset();
  }
  if (target) {
    Say(out, Level::kInfo,
        Format("the trainer wrote checkpoint {} on the stop signal; uploading it", target->id));
    StartFinalUpload(t, *target, out);
    return;
  }
  Finish(t, out);
}

void JobPolicy::Finish(PolicyTime t, JobActions& out) {
  if (end_ == JobEnd::kNotice) {
    out.push_back(job_action::CompleteLifecycleHook{});
    Housekeeping(out);
    Event(t, "stop",
          {{"reason", "notice"},
           {"action", notice_ ? notice_->action : ""},
           {"notice_to_commit_seconds", OrNull(notice_to_commit_)},
           {"read_after_seconds", seen_late_},
           {"seq", OrNull(final_seq_)}},
          out);
    const int code = final_failed_ ? kExitNotCommitted : kExitInterrupted;
    const std::string what = final_failed_ ? "the newest checkpoint could not be committed"
                             : final_seq_  ? "snapshot " + SeqName(*final_seq_) + " committed"
                                           : std::string("nothing new to commit");
    Say(out, final_failed_ ? Level::kError : Level::kInfo,
        Format("interrupted: {} in {:.1f}s from the notice; exiting {}", what,
               notice_to_commit_.value_or(stopping_elapsed_), code));
    Exit(code, /*release_lease=*/true, out);
    return;
  }
  // SIGTERM (docker stop, ECS draining, a pod's eviction) stops a job that
  // is not done: never 0, which an engine reads as success and would not
  // retry (docs/design.md §2).
  Housekeeping(out);
  Event(t, "stop", {{"reason", "signal"}, {"seq", OrNull(final_seq_)}}, out);
  const int code = final_failed_ ? kExitNotCommitted : kExitInterrupted;
  Say(out, final_failed_ ? Level::kError : Level::kInfo,
      Format("stopped before completion: {}; exiting {}",
             final_failed_ ? std::string("the newest checkpoint could not be committed")
             : final_seq_  ? "snapshot " + SeqName(*final_seq_) + " committed"
                           : std::string("nothing new to commit"),
             code));
  Exit(code, /*release_lease=*/true, out);
}

JobActions JobPolicy::OnStopSignal(PolicyTime t) {
  if (o_.member) return MemberStopSignal(t);
  JobActions out;
  if (phase_ != JobPhase::kTraining) return out;  // already ending
  out.push_back(job_action::Notify{"STOPPING=1"});
  Say(out, Level::kInfo, "stopping: last checkpoint, upload, stop the trainer");
  defer_ = true;
  const bool signal = o_.checkpoint_signal && trainer_running_;
  // The engine's kill comes stop_timeout after its SIGTERM (docs/agent.md).
  stop_deadline_ = t.mono + o_.stop_timeout;
  const milliseconds wait =
      std::min({o_.stop_grace, milliseconds(seconds(60)), o_.stop_timeout / 4});
  BeginFinal(t, JobEnd::kSignal, t.mono + (signal ? wait : milliseconds(0)), t.mono + wait, signal,
             out);
  final_retry_until_ = std::min(final_retry_until_, *stop_deadline_ - kNoticeSafety);
  return out;
}

JobActions JobPolicy::OnFenced(PolicyTime t, const std::string& why) {
  JobActions out;
  if (phase_ == JobPhase::kDone || end_ == JobEnd::kFenced) return out;
  Say(out, Level::kError,
      Format("FENCED: {}; stopping the trainer and committing nothing more", why));
  if (upload_) out.push_back(job_action::CancelUpload{});
  end_ = JobEnd::kFenced;
  fenced_why_ = why;
  restart_at_.reset();
  Stop(t, out);
  return out;
}

}  // namespace sg
