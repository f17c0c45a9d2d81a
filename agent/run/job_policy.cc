#include "agent/run/job_policy.h"

#include <algorithm>

#include "agent/config/exit_codes.h"
#include "agent/run/job_policy_detail.h"
#include "agent/run/notice_budget.h"
#include "agent/detect/presets.h"
#include "agent/trainer/restart_backoff.h"
#include "agent/repo/store_names.h"
#include "common/log.h"
#include "common/signal_names.h"

namespace sg {

using namespace job_policy_detail;  // NOLINT(google-build-using-namespace)

void WriteToLog(const job_action::Log& log) {
  switch (log.level) {
    case Level::kDebug:
      LogDebug("{}", log.message);
      return;
    case Level::kInfo:
      LogInfo("{}", log.message);
      return;
    case Level::kWarn:
      LogWarn("{}", log.message);
      return;
    case Level::kError:
      LogError("{}", log.message);
      return;
  }
}

JobPolicyOptions JobPolicyOptions::FromConfig(const Config& config) {
  JobPolicyOptions o;
  o.upload_interval = config.upload_interval;
  o.checkpoint_interval = config.checkpoint_interval;
  if (config.checkpoint_cadence.automatic) {
    o.checkpoint_interval.reset();  // the cadence takes its place
    o.cadence = CadenceOptionsOf(config.checkpoint_cadence);
  }
  o.checkpoint_signal = config.checkpoint_signal;
  o.snapshot_on_rebalance = config.on_rebalance == OnRebalance::kSnapshot;
  o.restart_max = config.restart.max;
  o.restart_backoff = config.restart.backoff;
  o.restart_max_backoff = config.restart.max_backoff;
  o.stop_grace = config.stop_grace;
  o.stop_timeout = duration_cast<milliseconds>(config.stop_timeout);
  o.settle = duration_cast<milliseconds>(SettleTime(config));
  o.member = config.nodes > 1;
  return o;
}

JobPolicy::JobPolicy(JobPolicyOptions options)
    : o_(std::move(options)), upload_rate_(kDefaultUploadBytesPerSecond) {}

JobActions JobPolicy::OnLeaseAcquired(PolicyTime /*t*/) {
  if (phase_ == JobPhase::kLease) phase_ = JobPhase::kRestore;
  return {};
}

JobActions JobPolicy::OnRestored(PolicyTime t, const RestoredState& restored) {
  if (o_.member) return MemberRestored(t, restored);
  JobActions out;
  if (phase_ != JobPhase::kRestore) return out;
  phase_ = JobPhase::kTraining;
  committed_ = restored.committed;
  committed_step_ = restored.committed_step;
  last_seq_ = restored.last_seq;
  next_upload_ = restored.upload_first ? t.mono : t.mono + o_.upload_interval;
  if (o_.checkpoint_interval) next_checkpoint_signal_ = t.mono + *o_.checkpoint_interval;
  CadenceLearn(restored, out);
  Event(t, "start", {{"resume", restored.resume}}, out);
  trainer_running_ = true;
  out.push_back(job_action::StartTrainer{++attempt_, false});
  return out;
}

JobActions JobPolicy::OnTick(PolicyTime t) {
  if (o_.member) return MemberTick(t);
  JobActions out;
  if (phase_ == JobPhase::kFinalSnapshot || (phase_ == JobPhase::kStopping && stopped_)) {
    if (upload_ && !upload_->final && t.mono >= cancelled_until_) {
      // The cancelled periodic upload does not end (a store that does not
      // answer): go on without it.
      Say(out, Level::kWarn,
          Format("the cancelled upload of checkpoint {} does not end; going on without it",
                 upload_->checkpoint.id));
      upload_.reset();
    }
    if (!upload_) {
      out.push_back(job_action::FindCheckpoints{});
    } else if (upload_->final && deadline() && t.mono >= give_up_at_) {
      GiveUpUpload(t, out);
    }
    return out;
  }
  if (phase_ != JobPhase::kTraining) return out;
  if (!trainer_running_ && restart_at_ && t.mono >= *restart_at_) {
    restart_at_.reset();
    trainer_running_ = true;
    out.push_back(job_action::StartTrainer{++attempt_, true});
    Event(t, "trainer-start", {{"attempt", attempt_}}, out);
  }
  if (o_.checkpoint_interval && t.mono >= next_checkpoint_signal_) {
    next_checkpoint_signal_ = t.mono + *o_.checkpoint_interval;
    if (o_.checkpoint_signal && trainer_running_) {
      out.push_back(job_action::SignalTrainer{"checkpoint_interval"});
    }
  }
  CadenceTick(t, out);
  if (!upload_ && t.mono >= next_upload_) out.push_back(job_action::FindCheckpoints{});
  return out;
}

JobActions JobPolicy::OnCheckpoints(PolicyTime t, const std::vector<Checkpoint>& newest_first,
                                    std::optional<Clock::MonoTime> next_settle, bool writing) {
  if (o_.member) return MemberCheckpoints(t, newest_first, writing);
  JobActions out;
  if (upload_) return out;
  if (phase_ == JobPhase::kFinalSnapshot) {
    DecideFinal(t, newest_first, writing, out);
    return out;
  }
  if (phase_ == JobPhase::kStopping && stopped_) {
    AfterStop(t, newest_first, writing, out);
    return out;
  }
  if (phase_ != JobPhase::kTraining) return out;
  if (std::optional<Checkpoint> newer = FirstNewerThan(newest_first, committed_)) {
    next_upload_ = t.mono + o_.upload_interval;
    upload_ = Upload{*newer, false};
    out.push_back(job_action::StartUpload{*newer, false});
  } else if (next_settle) {
    next_upload_ = std::max(t.mono, *next_settle);  // look again when something settles
  } else {
    next_upload_ = t.mono + std::min<milliseconds>(o_.upload_interval, seconds(1));
  }
  return out;
}

JobActions JobPolicy::OnUploadFinished(PolicyTime t, const UploadOutcome& outcome) {
  if (o_.member) return MemberUploadFinished(t, outcome);
  JobActions out;
  if (!upload_) return out;
  const Upload upload = std::move(*upload_);
  upload_.reset();
  if (phase_ == JobPhase::kDone || end_ == JobEnd::kFenced) return out;
  const std::string& id = upload.checkpoint.id;
  switch (outcome.kind) {
    case UploadOutcome::Kind::kFenced:
      return OnFenced(t, outcome.message);
    case UploadOutcome::Kind::kCommitted:
      CadenceCommitted(upload.checkpoint, t);
      Committed(t, outcome, upload.checkpoint, out);
      if (upload.final) {
        final_seq_ = outcome.seq;
        if (end_ == JobEnd::kNotice) {
          notice_to_commit_ = seen_late_ + SecondsBetween(notice_at_, t.mono);
        }
        if (stopped_) {
          Finish(t, out);
        } else {
          Stop(t, out);
        }
      }
      return out;
    case UploadOutcome::Kind::kNotCommitted:
      Say(out, Level::kInfo,
          Format("upload of checkpoint {} not committed: {}", id, outcome.message));
      if (!upload.final) {
        next_upload_ = t.mono + std::min<milliseconds>(o_.upload_interval, seconds(5));
        return out;
      }
      break;
    case UploadOutcome::Kind::kFailed:
      Say(out, Level::kError,
          upload.final ? Format("the final snapshot failed: {}", outcome.message)
                       : Format("upload of checkpoint {} failed: {}", id, outcome.message));
      if (!upload.final) return out;
      break;
  }
  final_failed_ = true;
  if (stopped_) {  // what the trainer wrote on the stop signal: no second try
    Finish(t, out);
    return out;
  }
  // A final upload that did not commit: again while there is time.
  if (final_attempts_ < kFinalAttempts && t.mono < final_retry_until_) {
    Say(out, Level::kWarn,
        Format("trying the final snapshot again ({} of {})", final_attempts_ + 1, kFinalAttempts));
    final_failed_ = false;
    return out;  // the next tick looks for the newest checkpoint again
  }
  if (end_ == JobEnd::kComplete) {
    // The job's last state is not in the store: no `complete` marker, so a
    // later run uploads the local checkpoint first and ends the job then.
    // Not a failure of the trial: another attempt resumes from the previous
    // snapshot (or, on this machine, uploads the local checkpoint first) and
    // finishes it. Exit 74, which every engine retries (docs/design.md §2).
    Say(out, Level::kError,
        Format("the trainer finished but its last checkpoint could not be stored; not marking "
               "the job complete; exiting {} so that it is run again",
               static_cast<int>(kExitNotCommitted)));
    Event(t, "failed", {{"reason", "final snapshot"}, {"error", outcome.message}}, out);
    end_ = JobEnd::kFailed;
    Exit(kExitNotCommitted, /*release_lease=*/true, out);
    return out;
  }
  Stop(t, out);
  return out;
}

void JobPolicy::Committed(PolicyTime t, const UploadOutcome& r, const Checkpoint& checkpoint, JobActions& out) {
  committed_ = CheckpointMark::Of(checkpoint);
  committed_step_ = checkpoint.step;
  committed_this_run_ = checkpoint.step;
  last_seq_ = r.seq;
  // The rate of what went over the wire: reused frames cost no upload time,
  // and counting them would make the next estimate optimistic.
  const uint64_t new_bytes = r.stored_bytes - std::min(r.reused_bytes, r.stored_bytes);
  if (r.seconds > 0.05 && new_bytes > 0) {
    upload_rate_ = static_cast<double>(new_bytes) / r.seconds;
  }
  Say(out, Level::kInfo,
      Format("snapshot {} committed: checkpoint {} (step {}), {} bytes stored ({} new, {} "
             "reused) in {:.1f}s",
             SeqName(r.seq), checkpoint.id,
             checkpoint.step ? std::to_string(*checkpoint.step) : "-", r.stored_bytes, new_bytes,
             r.reused_bytes, r.seconds));
  Event(t, "snapshot",
        {{"seq", r.seq},
         {"checkpoint", checkpoint.id},
         {"step", OrNull(checkpoint.step)},
         {"bytes", r.bytes},
         {"stored_bytes", r.stored_bytes},
         {"new_bytes", new_bytes},
         {"reused_bytes", r.reused_bytes},
         {"seconds", r.seconds},
         {"checkpoint_time", FormatUtc(checkpoint.newest_mtime, /*millis=*/true)}},
        out);
  out.push_back(job_action::Notify{"STATUS=snapshot " + SeqName(r.seq) + " committed"});
  retention_due_ = true;
  if (!defer_) Housekeeping(out);
}

JobActions JobPolicy::OnTrainerExited(PolicyTime t, const ExitStatus& status,
                                      const std::optional<std::string>& unearned) {
  if (o_.member) return MemberTrainerExited(t, status, unearned);
  JobActions out;
  trainer_running_ = false;
  if (phase_ == JobPhase::kFinalSnapshot) {
    // It cannot answer a checkpoint request any more: wait only for what it
    // wrote to settle.
    Say(out, Level::kWarn,
        Format("the trainer ended ({}) while the job was ending", status.ToString()));
    final_until_ = std::min(final_until_, t.mono + o_.settle + kAfterExitSlack);
    final_hard_until_ = std::min(final_hard_until_, t.mono + o_.settle + kAfterExitSlack);
    return out;
  }
  if (phase_ != JobPhase::kTraining) return out;
  if (status.success() && !unearned) {
    Say(out, Level::kInfo, "the trainer finished (exit 0); final snapshot");
    Event(t, "trainer-exit", {{"exit", status.ToString()}}, out);
    const Clock::MonoTime settled = t.mono + o_.settle + kAfterExitSlack;
    BeginFinal(t, JobEnd::kComplete, settled, settled, /*signal=*/false, out);
    return out;
  }
  if (unearned) {
    Say(out, Level::kError,
        Format("the trainer {}: not complete (complete_when); handled as a crash", *unearned));
    Event(t, "unearned", {{"why", *unearned}, {"attempt", attempt_}}, out);
  }
  Event(t, "crash", {{"exit", unearned ? *unearned : status.ToString()}, {"attempt", attempt_}},
        out);
  if (restarts_ >= o_.restart_max) {
    Say(out, Level::kError,
        Format("the trainer failed ({}) and was restarted {} times already; the job has failed",
               status.ToString(), restarts_));
    Event(t, "failed", {{"exit", status.ToString()}, {"restarts", restarts_}}, out);
    if (upload_) out.push_back(job_action::CancelUpload{});
    end_ = JobEnd::kFailed;
    Exit(kExitFailure, /*release_lease=*/true, out);
    return out;
  }
  const milliseconds backoff = Backoff();
  ++restarts_;
  Say(out, Level::kWarn,
      Format("the trainer failed ({}); restart {} of {} in {:.1f}s", status.ToString(), restarts_,
             o_.restart_max, static_cast<double>(backoff.count()) / 1000.0));
  restart_at_ = t.mono + backoff;
  return out;
}

milliseconds JobPolicy::Backoff() const {
  // The restart after restarts_ + 1 failures in a row, as a group's rounds wait.
  return RestartBackoff(restarts_ + 1, o_.restart_backoff, o_.restart_max_backoff);
}

JobActions JobPolicy::OnTrainerStartFailed(PolicyTime t, const std::string& why) {
  if (o_.member) return MemberStartFailed(t, why);
  JobActions out;
  if (phase_ == JobPhase::kDone) return out;
  trainer_running_ = false;
  Say(out, Level::kError, Format("starting the trainer failed: {}", why));
  if (upload_) out.push_back(job_action::CancelUpload{});
  end_ = JobEnd::kFailed;
  Exit(kExitFailure, /*release_lease=*/true, out);
  return out;
}

JobActions JobPolicy::OnInterruption(PolicyTime t, const InterruptionEvent& event,
                                     uint64_t newest_bytes) {
  if (o_.member) return MemberInterruption(t, event, newest_bytes);
  JobActions out;
  if (phase_ == JobPhase::kDone) return out;
  if (!event.IsNotice()) {
    Event(t, std::string(InterruptionKindName(event.kind)), event.ToJson(), out);
    if (event.kind == InterruptionEvent::Kind::kRebalance && o_.snapshot_on_rebalance &&
        phase_ == JobPhase::kTraining) {
      Say(out, Level::kWarn, "rebalance recommendation: taking a snapshot now");
      if (o_.checkpoint_signal && trainer_running_) {
        out.push_back(job_action::SignalTrainer{"the rebalance recommendation"});
      }
      next_upload_ = t.mono;  // upload as soon as a newer checkpoint is complete
    }
    if (event.kind == InterruptionEvent::Kind::kRebalance) CadenceRebalance(t, out);
    return out;
  }
  if (phase_ != JobPhase::kTraining) return out;  // already ending
  notice_at_ = t.mono;
  notice_ = event;
  // Nothing but the final snapshot until the trainer is stopped.
  defer_ = true;
  // Time left: to the deadline the notice names, else two minutes. The
  // notice is posted two minutes before its deadline: how late we read it.
  left_ = kNoticeLead;
  seen_late_ = 0;
  if (event.time && event.kind == InterruptionEvent::Kind::kNotice) {
    left_ = duration_cast<milliseconds>(*event.time - t.wall);
    seen_late_ = std::max(0.0, std::chrono::duration<double>(kNoticeLead - left_).count());
  }
  Say(out, Level::kWarn,
      Format("INTERRUPTION NOTICE: {} (read {:.1f}s after it was posted)", event.Describe(),
             seen_late_));
  // The agent stops once the final snapshot is in: systemd hears it now.
  out.push_back(job_action::Notify{"STOPPING=1"});
  out.push_back(job_action::Notify{"STATUS=interruption notice: " + event.Describe()});
  out.push_back(job_action::WriteNoticeFile{event, "", std::nullopt});
  nlohmann::ordered_json data = event.ToJson();
  data["read_after_seconds"] = seen_late_;
  data["seconds_left_when_read"] = static_cast<double>(left_.count()) / 1000.0;
  Event(t, "notice", std::move(data), out);
  // Wait for the trainer's checkpoint no longer than leaves time to upload it.
  const NoticeBudget budget = ComputeNoticeBudget(left_, newest_bytes, upload_rate_);
  const bool signal = o_.checkpoint_signal && trainer_running_;
  // Without a checkpoint signal, the trainer may answer the notice file: it
  // gets a quarter of the budget for that, then the stop signal (on which
  // many trainers save; AfterStop uploads that too).
  const milliseconds window =
      !trainer_running_ ? milliseconds(0) : (signal ? budget.wait : budget.wait / 4);
  Say(out, Level::kInfo,
      Format("{:.1f}s until the deadline; waiting up to {:.1f}s for a checkpoint (upload "
             "estimate {:.1f}s)",
             static_cast<double>(left_.count()) / 1000.0,
             static_cast<double>(window.count()) / 1000.0,
             static_cast<double>(budget.upload_estimate.count()) / 1000.0));
  BeginFinal(t, JobEnd::kNotice, t.mono + window, t.mono + budget.wait, signal, out);
  final_retry_until_ = notice_at_ + left_ - kNoticeSafety;
  return out;
}

void JobPolicy::Event(PolicyTime t, std::string kind, nlohmann::ordered_json data,
                      JobActions& out) {
  job_action::RecordEvent event{std::move(kind), std::move(data), t.wall};
  if (defer_) {
    deferred_events_.push_back(std::move(event));
    return;
  }
  out.push_back(std::move(event));
}

void JobPolicy::Housekeeping(JobActions& out) {
  defer_ = false;
  for (job_action::RecordEvent& event : deferred_events_) out.push_back(std::move(event));
  deferred_events_.clear();
  if (!retention_due_) return;
  retention_due_ = false;
  out.push_back(job_action::RunRetention{});
}

void JobPolicy::Exit(int code, bool release_lease, JobActions& out) {
  phase_ = JobPhase::kDone;
  exit_code_ = code;
  if (release_lease) out.push_back(job_action::ReleaseLease{});
  out.push_back(job_action::Exit{code});
}

}  // namespace sg
