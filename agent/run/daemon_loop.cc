// The one-node executor's turn of the one loop (docs/design.md §9,
// agent/run/node_shell.h): what it sees becomes an observation for JobPolicy
// (agent/run/job_policy.h), and each action the policy answers with is
// performed here. Every decision is the policy's.
#include "agent/run/daemon_agent.h"

#include <filesystem>

namespace sg::daemon_detail {

std::optional<Checkpoint> Agent::NewestLocal() {
  auto all = checkpoints_->Complete();
  if (!all.ok() || all->empty()) return std::nullopt;
  return all->front();
}

uint64_t Agent::NewestBytes() {
  std::optional<Checkpoint> newest = NewestLocal();
  return newest ? CheckpointBytes(cfg_.checkpoint_dir, *newest) : 0;
}

void Agent::Turn(Clock::MonoTime now, TurnNews news) {
  if (news.stop_signal) Perform(policy_.OnStopSignal(Now()));
  if (done_) return;
  if (fallback_.busy()) TakeFallback();
  // The renewal runs on a thread of its own: a request that hangs must
  // not keep the loop from the metadata service (docs/design.md §9).
  if (renewal_.busy()) {
    if (std::optional<Status> st = renewal_.Poll()) {
      if (st->reason() == "Fenced") {
        Perform(policy_.OnFenced(Now(), std::string(st->message())));
      } else if (!st->ok()) {
        LogWarn("renewing the lease failed (will retry): {}", st->message());
      }
    }
  } else if (std::unique_lock<std::mutex> lock(lease_mu_, std::try_to_lock);
             lock.owns_lock() && lease_.held() && lease_.RenewalDue()) {
    lock.unlock();
    renewal_.Start([this] { return RenewLease(); });
  }
  if (done_) return;
  if (uploader().busy()) {
    if (auto r = uploader().Poll()) Perform(policy_.OnUploadFinished(Now(), OutcomeOf(*r)));
  }
  if (done_) return;
  logs_.Tick(now, policy_.phase() == JobPhase::kTraining, generation_);
  for (const InterruptionEvent& e : news.events) {
    Perform(policy_.OnInterruption(Now(), e, e.IsNotice() ? NewestBytes() : 0));
    if (done_) return;
  }
  TakePrices();
  if (trainer_) {
    if (auto ended = trainer_->Poll()) {
      const std::optional<std::string> unearned = Unearned(*ended);
      if (ended->success() && !unearned) {
        finished_trainer_ = std::move(trainer_);
      } else {
        trainer_.reset();
      }
      exit_to_tell_ = TrainerExit{*ended, unearned};
      CheckResume(*ended);
      if (!fallback_.busy()) TellExit();
    }
  }
  if (done_) return;
  Perform(policy_.OnTick(Now()));
  metrics_.Tick(c_.clock.Now(), JobPhaseName(policy_.phase()));
}

void Agent::Perform(JobActions actions) {
  PerformInOrder(
      std::move(actions), [this](const JobAction& action) { return Do(action); },
      [] { return false; });
}

JobActions Agent::Do(const JobAction& action) {
  namespace a = job_action;
  if (const auto* log = std::get_if<a::Log>(&action)) {
    WriteToLog(*log);
  } else if (const auto* notify = std::get_if<a::Notify>(&action)) {
    if (notify->state == "STOPPING=1") {
      shell_.SayStopping();  // said once
    } else {
      (void)c_.notifier.Notify(notify->state);
    }
  } else if (const auto* start = std::get_if<a::StartTrainer>(&action)) {
    return StartTrainer(*start);
  } else if (std::holds_alternative<a::SignalTrainer>(action)) {
    if (cfg_.checkpoint_signal && trainer_ && trainer_->running()) {
      (void)SendCheckpointSignal(*trainer_, *cfg_.checkpoint_signal, signal_target_);
    }
  } else if (std::holds_alternative<a::FindCheckpoints>(action)) {
    return FindCheckpoints();
  } else if (const auto* upload = std::get_if<a::StartUpload>(&action)) {
    uploader().Start(upload->checkpoint);
  } else if (std::holds_alternative<a::CancelUpload>(action)) {
    if (uploader().busy()) uploader().Cancel();
  } else if (const auto* notice = std::get_if<a::WriteNoticeFile>(&action)) {
    if (Status st = WriteNoticeFile(notice_file_, NoticeOrRequestJson(notice->event, notice->why,
                                                                      notice->round, c_.clock.Now()));
        !st.ok()) {
      LogWarn("writing the notice file failed: {}", st.message());
    }
  } else if (const auto* stop = std::get_if<a::StopTrainer>(&action)) {
    if (trainer_ && trainer_->running() && !trainer_->Poll()) {
      auto stopped = trainer_->Stop(cfg_.stop_signal, stop->grace);
      if (stopped.ok()) LogInfo("the trainer stopped: {}", stopped->ToString());
    }
    return policy_.OnTrainerStopped(Now());
  } else if (const auto* event = std::get_if<a::RecordEvent>(&action)) {
    attempt_.Record(event->kind, event->data, event->at);
  } else if (std::holds_alternative<a::RunRetention>(action)) {
    store_work_.Post([this] {
      auto gc = Repository::Open(c_.store, cfg_.job).Prune(c_.clock, GcOptions{.keep = cfg_.keep});
      if (!gc.ok()) LogWarn("retention failed: {}", gc.status().message());
      // The logs of old attempts go with them (logs_keep, docs/design.md §13).
      auto logs = PruneLogs(c_.store, cfg_.job, cfg_.logs_keep);
      if (!logs.ok()) LogWarn("log retention failed: {}", logs.status().message());
    });
  } else if (std::holds_alternative<a::CompleteLifecycleHook>(action)) {
    // The Auto Scaling calls and the store's records of the job's end go to
    // the ordered queue too, behind the events before them: none holds the
    // loop, and the exit waits for them within its bound.
    store_work_.Post([this] { CompleteLifecycleHook(EndContext()); });
  } else if (const auto* marker = std::get_if<a::WriteCompleteMarker>(&action)) {
    store_work_.Post([this, seq = marker->seq, step = marker->step] {
      sg::WriteCompleteMarker(c_.store, c_.clock, events_, cfg_.job, c_.instance, seq, step);
    });
  } else if (std::holds_alternative<a::PerformOnComplete>(action)) {
    // Behind the marker: a shutdown never comes before the job is marked.
    store_work_.Post([this] { PerformOnComplete(EndContext()); });
  } else if (std::holds_alternative<a::ReleaseLease>(action)) {
    store_work_.Post([this] {
      std::lock_guard<std::mutex> lock(lease_mu_);
      if (!lease_.held()) return;
      if (Status st = lease_.Release(); !st.ok()) {
        LogWarn("releasing the lease failed: {}", st.message());
      }
    });
  } else if (const auto* exit = std::get_if<a::Exit>(&action)) {
    Finish(exit->code);
  }
  return {};
}

JobActions Agent::StartTrainer(const job_action::StartTrainer& a) {
  if (a.resume_from_newest_local && !resume_fixed_) {
    if (std::optional<Checkpoint> newest = NewestLocal()) {
      resume_ = cfg_.checkpoint_dir + "/" + newest->resume;
      // Not newer than the store's newest: a resume from that snapshot.
      const auto& mark = policy_.committed();
      resume_seq_ = mark && !IsNewerThan(*newest, *mark) ? policy_.last_seq() : std::nullopt;
    }
  }
  resume_fixed_ = false;
  guard_.Started(resume_seq_, policy_.committed());
  auto trainer = launcher().Start(TrainerLaunch{resume_, a.attempt, std::nullopt});
  if (!trainer.ok()) return policy_.OnTrainerStartFailed(Now(), trainer.status().message());
  trainer_ = std::move(*trainer);
  return {};
}

JobActions Agent::FindCheckpoints() {
  // Once the job is ending, what the trainer wrote is taken as soon as it is
  // closed and quiet, not after the whole settle time (docs/checkpoints.md).
  checkpoints_->SetUrgent(policy_.phase() == JobPhase::kFinalSnapshot ||
                          policy_.phase() == JobPhase::kStopping);
  auto all = checkpoints_->Complete();
  if (!all.ok()) {
    LogWarn("looking for checkpoints failed: {}", all.status().message());
    return policy_.OnCheckpoints(Now(), {}, std::nullopt);
  }
  return policy_.OnCheckpoints(Now(), *all, checkpoints_->NextSettle(), checkpoints_->Writing());
}

std::optional<std::string> Agent::Unearned(const ExitStatus& ended) {
  if (!ended.success() || !cfg_.complete_when) return std::nullopt;
  return UnearnedExit(*cfg_.complete_when, cfg_.checkpoint_dir);
}

void Agent::CheckResume(const ExitStatus& ended) {
  std::optional<SuspectVerdict> verdict = guard_.Exited(ended, NewestLocal());
  if (!verdict) return;
  SuspectRecord record{verdict->seq, FormatUtc(c_.clock.Now(), true), c_.instance, resume_,
                       verdict->exits, tail_.Lines()};
  fallback_seq_ = verdict->seq;
  fallback_.Start([this, record = std::move(record)] {
    return FallBackFromSuspect(c_.store, c_.clock, cfg_, events_, record);
  });
  TakeFallback();  // done already when the store work runs inline (tests)
}

void Agent::TakeFallback() {
  std::optional<StatusOr<StartPoint>> start = fallback_.Poll();
  if (!start) return;
  if (!start->ok()) {
    LogError("falling back from suspect snapshot {} failed: {}", SeqName(fallback_seq_),
             start->status().message());
  } else {
    resume_ = (*start)->state.resume;
    resume_seq_ = (*start)->state.upload_first || resume_.empty() ? std::nullopt
                                                                  : (*start)->state.last_seq;
    resume_fixed_ = true;
    // The restore swapped the checkpoint dir: watch the new one.
    if (own_checkpoints_) {
      if (auto watched = WatchedCheckpoints::Start(cfg_, c_.clock); watched.ok()) {
        own_checkpoints_ = std::move(*watched);
        checkpoints_ = own_checkpoints_.get();
      }
    }
    Perform(policy_.OnFallback(Now(), fallback_seq_, (*start)->state));
  }
  TellExit();
}

void Agent::TellExit() {
  if (std::optional<TrainerExit> e = std::exchange(exit_to_tell_, std::nullopt)) {
    Perform(policy_.OnTrainerExited(Now(), e->status, e->unearned));
  }
}

}  // namespace sg::daemon_detail
