// Notices, rebalance recommendations and stop signals (docs/design.md §14,
// "Notices"): read on the loop, as one node's agent reads them. Since no
// store call runs on the loop, nothing delays them: the trainer is asked for
// its checkpoint on the turn that reads the notice (Act), and the round's
// end is posted behind it.
#include <algorithm>

#include "agent/config/exit_codes.h"
#include "agent/group/group_agent_impl.h"
#include "agent/run/notice_budget.h"
#include "agent/run/notice_file.h"
#include "agent/trainer/agent_signals.h"
#include "common/log.h"
#include "common/signal_names.h"

namespace sg::group_detail {
namespace {

double Seconds(milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }

}  // namespace

void GroupAgent::Watch(Clock::MonoTime now, TurnNews turn) {
  News news;
  if (turn.stop_signal) {
    news.stop_signal = true;
    Act("SIGTERM", now + duration_cast<milliseconds>(cfg_.stop_timeout), nullptr);
  }
  // What the start read, then the poll's news (the shell's poll runs on a
  // thread of its own: agent/run/metadata_poll.h).
  std::vector<InterruptionEvent> events = std::exchange(start_others_, {});
  for (InterruptionEvent& e : turn.events) events.push_back(std::move(e));
  for (const InterruptionEvent& e : events) {
    if (!e.IsNotice()) {
      news.others.push_back(e);  // TakeRebalance decides (on_rebalance)
      continue;
    }
    milliseconds left = kGroupEndBudget;
    double late = 0;
    if (e.time) {
      left = duration_cast<milliseconds>(*e.time - c_.clock.Now());
      late = std::max(0.0, std::chrono::duration<double>(kNoticeLead - left).count());
    }
    LogWarn("INTERRUPTION NOTICE: {} (read {:.1f}s after it was posted)", e.Describe(), late);
    news.notices.push_back(e);
    Act("the notice", now + left, &e);
  }
  if (news.stop_signal || !news.notices.empty() || !news.others.empty()) TakeNews(now, news);
}

void GroupAgent::Act(const std::string& why, Clock::MonoTime deadline,
                     const InterruptionEvent* notice) {
  if (deadline_ && *deadline_ <= deadline) return;  // acted already, for an earlier deadline
  const bool first = !deadline_;
  deadline_ = deadline;
  if (!first) return;
  const std::optional<uint64_t> round =
      plan_ ? std::optional<uint64_t>(plan_->round) : std::nullopt;
  const nlohmann::ordered_json body =
      notice ? NoticeFileJson(*notice, round) : RequestFileJson(c_.clock.Now(), why, round);
  if (Status st = WriteNoticeFile(notice_file_, body); !st.ok()) {
    LogWarn("writing the notice file failed: {}", st.message());
  }
  asked_at_ = c_.clock.Now();
  AskTrainer(why);
}

void GroupAgent::TakeNews(Clock::MonoTime now, const News& news) {
  // On its way out: the ledger's events wait until the trainer is stopped.
  if (news.stop_signal || !news.notices.empty()) defer_events_ = true;
  for (const InterruptionEvent& e : news.others) TakeRebalance(now, e);
  if (news.stop_signal || !news.notices.empty()) SayStopping();
  // The Auto Scaling hook waits for this node's CONTINUE, sent after the stop.
  if (!news.notices.empty()) lifecycle_due_ = notice_read_ = true;
  if ((news.stop_signal || !news.notices.empty()) && state_ == State::kJoining) {
    // Leaving while the part is restored: the round cannot go on without
    // this node; its trainer never started. Out of the membership first (no
    // more beats either), so that the round's end never finds it planned
    // again; then `left`: the others stop at once, as nothing of this
    // node's can be saved.
    LogWarn("leaving round {} before its trainer started", plan_->round);
    noticed_ = true;
    LeaveMembership();
    EndRound(RoundEnd{"left", c_.instance, news.stop_signal ? "SIGTERM" : "notice"});
    for (const InterruptionEvent& e : news.notices) Event("notice", e.ToJson());
    Exit(kExitInterrupted);
    return;
  }
  if (news.stop_signal) {
    if (state_ == State::kInRound) {
      EndRound(RoundEnd{"stop", c_.instance, "SIGTERM"});
      BeginEnding(now, now + duration_cast<milliseconds>(cfg_.stop_timeout) - kGiveUpBeforeStop,
                  true, asked_at_);
    } else if (state_ != State::kEnding) {
      Exit(kExitInterrupted);
      return;
    } else {
      noticed_ = true;
    }
  }
  for (const InterruptionEvent& e : news.notices) {
    Event("notice", e.ToJson());
    if (state_ == State::kInRound) {
      LogWarn("interruption notice: ending round {} on every node", plan_->round);
      EndRound(RoundEnd{"notice", c_.instance, e.ToJson().dump()});
      // The notice's budget, as one node's agent has it (notice_budget.h):
      // the answer must come in time for its upload at the measured rate;
      // the round is given up on kGiveUpBeforeStop before the deadline,
      // and the trainer stopped then.
      const milliseconds left =
          e.time ? duration_cast<milliseconds>(*e.time - c_.clock.Now()) : kGroupEndBudget;
      const NoticeBudget budget = ComputeNoticeBudget(left, NewestPartBytes(), part_rate_);
      LogInfo("{:.1f}s until the deadline; waiting up to {:.1f}s for rank {}'s checkpoint "
              "(upload estimate {:.1f}s)",
              Seconds(left), Seconds(budget.wait), rank_, Seconds(budget.upload_estimate));
      BeginEnding(now, now + std::max(left - kGiveUpBeforeStop, milliseconds(0)), true,
                  asked_at_);
      answer_wait_until_ = now + budget.wait;
    } else if (state_ == State::kEnding) {
      noticed_ = true;
    } else if (state_ != State::kDone) {
      LogWarn("interruption notice while not in a round: leaving the group");
      noticed_ = true;
      LeaveMembership();
      Exit(kExitInterrupted);
      return;
    }
  }
}

}  // namespace sg::group_detail
