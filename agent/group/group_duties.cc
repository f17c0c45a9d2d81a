// What a node of a group owes as one node's agent does (docs/design.md §14,
// "Like one node"): systemd's READY=1 and STOPPING=1 (WATCHDOG=1 is the
// loop's), checkpoint_signal where agent/trainer/checkpoint_signal.h says, and a
// rebalance recommendation's snapshot (on_rebalance).
#include "agent/group/group_agent_impl.h"

#include "agent/repo/group_store.h"
#include "common/log.h"
#include "common/signal_names.h"

namespace sg::group_detail {

void GroupAgent::AskTrainer(const std::string& why) {
  if (!cfg_.checkpoint_signal || !trainer_ || !trainer_->running()) return;
  if (SendCheckpointSignal(*trainer_, *cfg_.checkpoint_signal, signal_target_).ok()) {
    LogInfo("asked the trainer{} for a checkpoint ({}) on {}",
            signal_target_ == SignalTarget::kWorkers ? "'s workers" : "",
            SignalName(*cfg_.checkpoint_signal), why);
  }
}

void GroupAgent::TakeRebalance(Clock::MonoTime now, const InterruptionEvent& e) {
  // History, not state.
  Event(InterruptionKindName(e.kind), e.ToJson());
  if (e.kind == InterruptionEvent::Kind::kRebalance) CadenceRebalance(now, "rebalance recommendation");
  if (e.kind != InterruptionEvent::Kind::kRebalance || cfg_.on_rebalance != OnRebalance::kSnapshot ||
      state_ != State::kInRound) {
    return;
  }
  LogWarn("rebalance recommendation: asking the trainer for a checkpoint, and every other node's "
          "agent to ask its own; the round goes on");
  AskTrainer("the rebalance recommendation");
  // Its part goes up as soon as it is complete; the other ranks' agents
  // upload theirs of the same step to complete the group snapshot (kFollow).
  next_periodic_ = now;
  flushes_taken_.insert(rank_);
  // The group flushes together: the other members read this record on
  // their next look and ask their own trainers (TakeFlushes), for trainers
  // that do not pass one rank's request on to the others.
  std::optional<int64_t> newest;
  if (auto all = RoundCheckpoints(); all.ok() && !all->empty()) newest = all->front().step;
  Write([this, round = plan_->round, rank = rank_, newest] {
    return group_.MarkFlush(round, rank, newest);
  },
        "recording the group flush of round " + std::to_string(plan_->round));
}

void GroupAgent::TakeFlushes(Clock::MonoTime now,
                             const std::map<int, std::optional<int64_t>>& flushes) {
  if (state_ != State::kInRound) return;
  for (const auto& [rank, step] : flushes) {
    if (!flushes_taken_.insert(rank).second) continue;
    LogInfo("rank {} was warned (a rebalance recommendation, at step {}): the group flushes; "
            "asking this node's trainer for a checkpoint",
            rank, step ? std::to_string(*step) : "none");
    AskTrainer("rank " + std::to_string(rank) + "'s rebalance recommendation");
    CadenceRebalance(now, "rank " + std::to_string(rank) + "'s rebalance recommendation");
    next_periodic_ = now;
  }
}

void GroupAgent::Noted(const Status& st, std::string_view what) {
  if (!st.ok()) LogWarn("{} failed: {}", what, st.message());
}

void GroupAgent::Event(std::string_view kind, nlohmann::ordered_json details,
                       std::optional<Clock::WallTime> when) {
  const Clock::WallTime at = when.value_or(c_.clock.Now());
  // The metrics count the group snapshots every node reads (RoundRead), not
  // the coordinator's commits alone.
  if (kind != "snapshot") metrics_.Observe(kind, details, at);
  if (defer_events_) {
    deferred_events_.push_back({std::string(kind), std::move(details), at});
    return;
  }
  // EventLog::Note logs a failure itself.
  calls_.Post([this, kind = std::string(kind), details = std::move(details), at] {
    events_.Note(kind, details, at);
  });
}

void GroupAgent::TakePrices(std::chrono::milliseconds wait) {
  std::optional<InstancePriceRead::Result> read = shell_.TakePrices(wait);
  if (!read) return;
  // At the time the reads began: a late answer never lengthens the attempt.
  Event("prices", std::move(read->details), read->began);
}

void GroupAgent::FlushEvents() {
  for (DeferredEvent& e : deferred_events_) {
    calls_.Post([this, e = std::move(e)] { events_.Note(e.kind, e.details, e.at); });
  }
  deferred_events_.clear();
}

void GroupAgent::LeaveMembership() {
  Write([this, agent = self_.agent] { return group_.RemoveMember(agent); },
        "leaving the membership");
}

void GroupAgent::EndRound(RoundEnd end) {
  Write([this, round = plan_->round, end = std::move(end)] { return group_.EndRound(round, end); },
        "ending the round");
}

}  // namespace sg::group_detail
