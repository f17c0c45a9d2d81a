// `spotguard status` (docs/operations.md): what the store says of a job, read
// once, and shown as JSON; its text form is agent/cli/status_text.cc's.
#include "agent/cli/status_command.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "agent/ledger/events.h"
#include "agent/config/exit_codes.h"
#include "agent/cli/group_commands.h"
#include "agent/cli/group_status.h"
#include "agent/logs/log_store.h"
#include "agent/repo/progress.h"
#include "agent/repo/quarantine.h"
#include "agent/repo/restorer.h"
#include "agent/run/retry_budget.h"
#include "agent/repo/open_store.h"
#include "agent/cli/status_parts.h"
#include "agent/repo/repository.h"
#include "common/aws_credentials.h"
#include "common/log.h"

namespace sg {

namespace {

constexpr size_t kInterruptionsShown = 5;

nlohmann::ordered_json AgeOrNull(const std::optional<std::chrono::seconds>& age) {
  return age ? nlohmann::ordered_json(age->count()) : nlohmann::ordered_json(nullptr);
}

}  // namespace

namespace status_detail {

std::optional<std::chrono::seconds> AgeOf(const std::string& utc, Clock::WallTime now) {
  if (utc.empty()) return std::nullopt;
  auto t = ParseIso8601(utc);
  if (!t.ok()) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::seconds>(now - *t);
}

std::string AgoText(const std::optional<std::chrono::seconds>& age) {
  if (!age) return "age unknown";
  if (age->count() < 0) return FormatAge(*age);
  return FormatAge(*age) + " ago";
}

bool LeaseIsStale(const LeaseState& lease, Clock::WallTime now, Duration timeout) {
  const auto age = AgeOf(lease.heartbeat, now);
  return !lease.released && age && *age > std::chrono::duration_cast<std::chrono::seconds>(timeout);
}

// The details of an event beyond kind, time and instance, as "k=v" pairs.
std::string EventDetails(const nlohmann::json& e) {
  std::string out;
  for (auto it = e.begin(); it != e.end(); ++it) {
    if (it.key() == "kind" || it.key() == "time" || it.key() == "instance") continue;
    if (!out.empty()) out += " ";
    out += it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump());
  }
  return out;
}

std::string Field(const nlohmann::json& e, const char* name) {
  auto it = e.find(name);
  if (it == e.end()) return "-";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// The engine's index and attempt of the newest run that recorded them: the
// newest event that carries them, else the newest snapshot.
EngineSeen EngineOf(const JobStatus& s) {
  for (const nlohmann::json& e : s.recent_events) {  // newest first
    EngineSeen seen;
    if (auto it = e.find("index"); it != e.end() && it->is_number_integer()) seen.index = *it;
    if (auto it = e.find("attempt"); it != e.end() && it->is_number_integer()) seen.attempt = *it;
    if (seen.index || seen.attempt) return seen;
  }
  if (s.newest) return {s.newest->index, s.newest->attempt};
  return {};
}

}  // namespace status_detail

bool IsInterruptionKind(std::string_view kind) {
  return kind == "notice" || kind == "rebalance" || kind == "lifecycle";
}

bool JobStatus::empty() const {
  return !lease && committed == 0 && !complete && event_count == 0 && problems.empty();
}

std::string FormatAge(std::chrono::seconds age) {
  if (age.count() < 0) return "in the future (" + FormatAge(-age) + " ahead of this clock)";
  const int64_t s = age.count();
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm %02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh %02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldd %lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  }
  return buf;
}

StatusOr<JobStatus> ReadJobStatus(ObjectStore& store, const std::string& job,
                                  size_t recent_events) {
  JobStatus s;
  s.job = job;
  s.store = store.Describe();

  const Repository repo = Repository::Open(store, job);
  SG_ASSIGN_OR_RETURN(std::optional<std::string> lease, repo.ReadLease());
  if (lease) {
    auto parsed = LeaseKeeper::Parse(*lease);
    if (parsed.ok()) {
      s.lease = *parsed;
    } else {
      s.problems.push_back(repo.LeaseName() + ": " + parsed.status().message());
    }
  }

  SnapshotCatalog catalog = repo.Catalog();
  SG_ASSIGN_OR_RETURN(std::vector<uint64_t> committed,
                      catalog.CommittedAndQuarantined(s.quarantined));
  s.committed = committed.size();
  s.suspect = catalog.Suspect();
  for (uint64_t seq : committed) {
    auto m = catalog.ReadManifest(seq);
    if (m.ok()) {
      s.newest = std::move(*m);
      break;
    }
    s.problems.push_back("snapshot " + SeqName(seq) + ": " + m.status().message());
  }

  SG_ASSIGN_OR_RETURN(std::optional<std::string> complete, repo.ReadComplete());
  if (complete) {
    s.complete = true;
    auto j = nlohmann::json::parse(*complete, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) {
      JobCompletion c;
      if (j.contains("time") && j["time"].is_string()) c.time = j["time"];
      if (j.contains("instance") && j["instance"].is_string()) c.instance = j["instance"];
      if (j.contains("seq") && j["seq"].is_number_unsigned()) c.seq = j["seq"].get<uint64_t>();
      if (j.contains("step") && j["step"].is_number_integer()) c.step = j["step"].get<int64_t>();
      s.completion = c;
    } else {
      s.problems.push_back(repo.CompleteName() + ": the marker is not a JSON object");
    }
  }

  // One listing of the events, newest first: the interruptions and the
  // recent ones are read from it.
  SG_ASSIGN_OR_RETURN(std::vector<StoredEvent> events, repo.Events());
  s.event_count = events.size();
  std::sort(events.begin(), events.end(),
            [](const StoredEvent& a, const StoredEvent& b) { return a.key > b.key; });
  for (const StoredEvent& e : events) {
    const bool interruption = IsInterruptionKind(e.kind);
    if (interruption) ++s.interruption_count;
    const bool recent = s.recent_events.size() < recent_events;
    const bool shown = interruption && s.interruptions.size() < kInterruptionsShown;
    if (!recent && !shown) continue;
    auto body = store.Get(e.key);
    if (!body.ok()) continue;  // removed meanwhile
    auto j = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    if (recent) s.recent_events.push_back(j);
    if (shown) s.interruptions.push_back(std::move(j));
  }
  return s;
}


nlohmann::ordered_json JobStatusToJson(const JobStatus& s, Clock::WallTime now,
                                       Duration lease_timeout) {
  using nlohmann::ordered_json;
  ordered_json out = {{"job", s.job}, {"store", s.store}, {"empty", s.empty()}};
  if (s.lease) {
    out["lease"] = {{"generation", s.lease->generation},
                    {"instance", s.lease->instance},
                    {"heartbeat", s.lease->heartbeat},
                    {"heartbeat_age_seconds", AgeOrNull(status_detail::AgeOf(s.lease->heartbeat, now))},
                    {"released", s.lease->released},
                    {"agent_pid", s.lease->agent ? nlohmann::ordered_json(s.lease->agent->pid)
                                                 : nlohmann::ordered_json(nullptr)},
                    {"stale", status_detail::LeaseIsStale(*s.lease, now, lease_timeout)}};
  } else {
    out["lease"] = nullptr;
  }
  ordered_json newest = nullptr;
  if (s.newest) {
    const Manifest& m = *s.newest;
    newest = {{"seq", m.seq},
              {"created", m.created},
              {"age_seconds", AgeOrNull(status_detail::AgeOf(m.created, now))},
              {"instance", m.instance},
              {"generation", m.generation},
              {"files", m.files.size()},
              {"size", m.TotalSize()},
              {"stored_size", m.TotalStored()},
              {"step", m.step ? ordered_json(*m.step) : ordered_json(nullptr)},
              {"resume", m.resume},
              {"index", m.index ? ordered_json(*m.index) : ordered_json(nullptr)},
              {"attempt", m.attempt ? ordered_json(*m.attempt) : ordered_json(nullptr)},
              {"quarantined", QuarantinedReferences(m, s.quarantined)}};
  }
  out["snapshots"] = {{"committed", s.committed},
                      {"newest", newest},
                      {"suspect", s.suspect},
                      {"quarantined", s.quarantined}};
  const auto engine = status_detail::EngineOf(s);
  const auto budget = AttemptBudgetWarning(engine.attempt, s.attempt_cap);
  out["engine"] = {
      {"index", engine.index ? ordered_json(*engine.index) : ordered_json(nullptr)},
      {"attempt", engine.attempt ? ordered_json(*engine.attempt) : ordered_json(nullptr)},
      {"max_attempts", s.attempt_cap > 0 ? ordered_json(s.attempt_cap) : ordered_json(nullptr)},
      {"warning", budget ? ordered_json(*budget) : ordered_json(nullptr)}};
  out["complete"] = s.complete;
  if (s.completion) {
    const JobCompletion& c = *s.completion;
    out["completion"] = {{"time", c.time},
                         {"instance", c.instance},
                         {"seq", c.seq ? ordered_json(*c.seq) : ordered_json(nullptr)},
                         {"step", c.step ? ordered_json(*c.step) : ordered_json(nullptr)}};
  } else {
    out["completion"] = nullptr;
  }
  out["interruptions"] = {{"total", s.interruption_count}, {"recent", s.interruptions}};
  out["events"] = {{"total", s.event_count}, {"recent", s.recent_events}};
  out["problems"] = s.problems;
  return out;
}

int RunStatusCommand(const Config& config, const std::map<std::string, std::string>& env,
                     bool json) {
  auto store = OpenStore(config, env, nullptr, StoreUse::kInteractive, StoreAccess::kReadOnly);
  if (!store.ok()) {
    std::cerr << "spotguard status: " << store.status().message() << "\n";
    return StoreOpenExitCode(store.status());
  }
  std::optional<nlohmann::ordered_json> group;
  if (config.nodes > 1) {
    auto g = GroupStatusJson(config, **store);
    if (!g.ok()) {
      std::cerr << "spotguard status: reading the group of job " << config.job << ": "
                << g.status().message() << "\n";
      return kExitFailure;
    }
    group = std::move(*g);
  }
  auto status = ReadJobStatus(**store, config.job);
  if (!status.ok()) {
    std::cerr << "spotguard status: reading job " << config.job << " from " << (*store)->Describe()
              << ": " << status.status().message() << "\n";
    return kExitFailure;
  }
  status->attempt_cap = config.fleet_max_attempts;
  const auto now = SystemClock().Now();
  // The newest shipped log segment: the running attempt's (docs/design.md §13).
  auto newest_log = NewestLogSegment(**store, config.job);
  const std::string log_key = newest_log.ok() && *newest_log ? (*newest_log)->key : "";
  // Without `nodes`, a job of several nodes has no snapshot of its own.
  const std::optional<std::string> hint =
      !group && status->committed == 0 ? GroupSnapshotsHint(**store, config.job) : std::nullopt;
  if (json) {
    nlohmann::ordered_json j = JobStatusToJson(*status, now, config.lease.timeout);
    j["newest_log_segment"] =
        log_key.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(log_key);
    if (group) j["group"] = std::move(*group);  // nodes > 1 (docs/multi-node.md)
    if (hint) j["hint"] = *hint;
    std::cout << j.dump(2) << "\n";
  } else {
    if (group) std::cout << GroupStatusText(*group);
    std::cout << JobStatusToText(*status, now, config.lease.timeout);
    if (hint) std::cout << "hint: " << *hint << "\n";
    if (!log_key.empty()) std::cout << "logs: newest segment " << log_key << " (spotguard logs)\n";
  }
  return kExitOk;
}

}  // namespace sg
