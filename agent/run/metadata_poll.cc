#include "agent/run/metadata_poll.h"

namespace sg {

MetadataPoll::MetadataPoll(InterruptionMonitor* monitor, Duration interval, bool run_inline)
    : monitor_(monitor), interval_(interval), call_(run_inline) {}

std::vector<InterruptionEvent> MetadataPoll::Take(Clock::MonoTime now) {
  std::vector<InterruptionEvent> events;
  if (!monitor_) return events;
  if (call_.busy()) {
    std::optional<std::vector<InterruptionEvent>> ended = call_.Poll();
    if (!ended) return events;  // still reading
    events = std::move(*ended);
  }
  if (now < next_) return events;
  next_ = now + interval_;
  call_.Start([monitor = monitor_] { return monitor->PollOnce(); });
  // Run inline, the poll has ended already: its events are this turn's.
  if (std::optional<std::vector<InterruptionEvent>> ended = call_.Poll()) {
    for (InterruptionEvent& e : *ended) events.push_back(std::move(e));
  }
  return events;
}

bool MetadataPoll::Finish(std::chrono::milliseconds limit) {
  if (!call_.busy()) return true;
  return call_.WaitFor(limit).has_value();
}

}  // namespace sg
