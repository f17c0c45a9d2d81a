#include "agent/ledger/events.h"

#include <algorithm>

#include "agent/repo/repository.h"
#include "common/files.h"
#include "common/log.h"
#include "common/strings.h"

namespace sg {

namespace {

// instance-<start time>-<random>: unique per run, sortable per instance.
std::string NewAttemptId(const std::string& instance, Clock& clock) {
  std::string stamp;
  for (char c : FormatUtc(clock.Now(), /*millis=*/false)) {
    if (c != '-' && c != ':') stamp += c;
  }
  return instance + "-" + stamp + "-" + RandomHex(2);
}

}  // namespace

EventLog::EventLog(ObjectStore& store, Clock& clock, std::string job, std::string instance,
                   std::string attempt_id)
    : store_(store),
      clock_(clock),
      job_(std::move(job)),
      instance_(std::move(instance)),
      attempt_id_(attempt_id.empty() ? NewAttemptId(instance_, clock) : std::move(attempt_id)) {}

Status EventLog::Record(std::string_view kind, nlohmann::ordered_json details,
                        std::optional<Clock::WallTime> at) {
  // Create-only, so two instances recording the same kind in the same
  // millisecond cannot overwrite each other's event: the later one moves to
  // the next free millisecond.
  auto when = at ? *at : clock_.Now();
  Status st;
  for (int attempt = 0; attempt < 8; ++attempt, when += std::chrono::milliseconds(1)) {
    st = Put(kind, details, when);
    if (!st.Is(StatusCode::kPreconditionFailed)) break;
  }
  if (!st.ok()) LogWarn("recording the {} event failed: {}", kind, st.message());
  return st;
}

Status EventLog::Put(std::string_view kind, const nlohmann::ordered_json& details,
                     Clock::WallTime now) {
  const std::string time = FormatUtc(now, /*millis=*/true);
  // The event's own fields come last, so details cannot overwrite them (a
  // notice's "time" is its deadline, kept as "detail_time").
  nlohmann::ordered_json body = nlohmann::ordered_json::object();
  if (details.is_object()) {
    for (auto& [k, v] : details.items()) {
      const bool own = k == "kind" || k == "time" || k == "instance" || k == "attempt_id" ||
                       (k == "index" && index_) || (k == "attempt" && attempt_) ||
                       (k == "node" && node_);
      body[own ? "detail_" + k : k] = v;
    }
  }
  body["kind"] = kind;
  body["time"] = time;
  body["instance"] = instance_;
  if (index_) body["index"] = *index_;
  if (attempt_) body["attempt"] = *attempt_;
  body["attempt_id"] = attempt_id_;
  if (node_) body["node"] = *node_;
  // 2026-11-22T08:22:00.123Z -> 20261122T082200.123Z: sortable and key-safe.
  return Repository::Open(store_, job_).PutEvent(CompactStamp(time), kind, body.dump());
}

StatusOr<std::vector<nlohmann::json>> EventLog::Recent(size_t limit) {
  SG_ASSIGN_OR_RETURN(std::vector<StoredEvent> objects, Repository::Open(store_, job_).Events());
  std::sort(objects.begin(), objects.end(),
            [](const StoredEvent& a, const StoredEvent& b) { return a.key > b.key; });
  std::vector<nlohmann::json> out;
  for (const StoredEvent& o : objects) {
    if (out.size() >= limit) break;
    auto body = store_.Get(o.key);
    if (!body.ok()) continue;
    auto j = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

}  // namespace sg
