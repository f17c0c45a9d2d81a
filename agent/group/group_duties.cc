// The group executor's shared duties (docs/design.md §14): the ledger's
// events (deferred once the node is on its way out), the instance's prices,
// and the member record's and the round's writes.
#include "agent/group/group_agent_impl.h"

#include "agent/repo/group_store.h"
#include "common/log.h"
#include "common/signal_names.h"

namespace sg::group_detail {

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
