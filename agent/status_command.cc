#include "agent/status_command.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "agent/events.h"
#include "agent/exit_codes.h"
#include "agent/group_commands.h"
#include "agent/group_status.h"
#include "agent/log_store.h"
#include "agent/progress.h"
#include "agent/restorer.h"
#include "agent/retry_budget.h"
#include "agent/snapshot_commands.h"
#include "agent/store_layout.h"
#include "common/aws_credentials.h"
#include "common/log.h"

namespace sg {
namespace {

constexpr size_t kInterruptionsShown = 5;

std::optional<std::chrono::seconds> AgeOf(const std::string& utc, Clock::WallTime now) {
  if (utc.empty()) return std::nullopt;
  auto t = ParseIso8601(utc);
  if (!t.ok()) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::seconds>(now - *t);
}

nlohmann::ordered_json AgeOrNull(const std::optional<std::chrono::seconds>& age) {
  return age ? nlohmann::ordered_json(age->count()) : nlohmann::ordered_json(nullptr);
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

StatusOr<std::optional<std::string>> GetIfPresent(ObjectStore& store, const std::string& key) {
  auto body = store.Get(key);
  if (body.ok()) return std::optional<std::string>(std::move(*body));
  if (body.status().Is(StatusCode::kNotFound)) return std::optional<std::string>();
  return body.status();
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

}  // namespace

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

  SG_ASSIGN_OR_RETURN(std::optional<std::string> lease, GetIfPresent(store, LeaseKey(job)));
  if (lease) {
    auto parsed = LeaseKeeper::Parse(*lease);
    if (parsed.ok()) {
      s.lease = *parsed;
    } else {
      s.problems.push_back(LeaseKey(job) + ": " + parsed.status().message());
    }
  }

  SnapshotCatalog catalog(store, job);
  SG_ASSIGN_OR_RETURN(std::vector<uint64_t> committed, catalog.Committed());
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

  SG_ASSIGN_OR_RETURN(std::optional<std::string> complete, GetIfPresent(store, CompleteKey(job)));
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
      s.problems.push_back(CompleteKey(job) + ": the marker is not a JSON object");
    }
  }

  const std::string events_prefix = EventsPrefix(job);
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> events, ListAll(store, events_prefix));
  s.event_count = events.size();
  std::sort(events.begin(), events.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key > b.key; });
  for (const ObjectInfo& o : events) {
    if (!IsInterruptionKind(EventKindOfKey(o.key))) continue;
    ++s.interruption_count;
    if (s.interruptions.size() >= kInterruptionsShown) continue;
    auto body = store.Get(o.key);
    if (!body.ok()) continue;  // removed meanwhile
    auto j = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) s.interruptions.push_back(std::move(j));
  }
  if (!events.empty()) {
    EventLog log(store, SystemClock(), job, /*instance=*/"");
    SG_ASSIGN_OR_RETURN(s.recent_events, log.Recent(recent_events));
  }
  return s;
}

namespace {

// The engine's index and attempt of the newest run that recorded them: the
// newest event that carries them, else the newest snapshot.
struct EngineSeen {
  std::optional<int64_t> index, attempt;
};

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

}  // namespace

nlohmann::ordered_json JobStatusToJson(const JobStatus& s, Clock::WallTime now,
                                       Duration lease_timeout) {
  using nlohmann::ordered_json;
  ordered_json out = {{"job", s.job}, {"store", s.store}, {"empty", s.empty()}};
  if (s.lease) {
    out["lease"] = {{"generation", s.lease->generation},
                    {"instance", s.lease->instance},
                    {"heartbeat", s.lease->heartbeat},
                    {"heartbeat_age_seconds", AgeOrNull(AgeOf(s.lease->heartbeat, now))},
                    {"released", s.lease->released},
                    {"agent_pid", s.lease->agent ? nlohmann::ordered_json(s.lease->agent->pid)
                                                 : nlohmann::ordered_json(nullptr)},
                    {"stale", LeaseIsStale(*s.lease, now, lease_timeout)}};
  } else {
    out["lease"] = nullptr;
  }
  ordered_json newest = nullptr;
  if (s.newest) {
    const Manifest& m = *s.newest;
    newest = {{"seq", m.seq},
              {"created", m.created},
              {"age_seconds", AgeOrNull(AgeOf(m.created, now))},
              {"instance", m.instance},
              {"generation", m.generation},
              {"files", m.files.size()},
              {"size", m.TotalSize()},
              {"stored_size", m.TotalStored()},
              {"step", m.step ? ordered_json(*m.step) : ordered_json(nullptr)},
              {"resume", m.resume},
              {"index", m.index ? ordered_json(*m.index) : ordered_json(nullptr)},
              {"attempt", m.attempt ? ordered_json(*m.attempt) : ordered_json(nullptr)}};
  }
  out["snapshots"] = {{"committed", s.committed}, {"newest", newest}, {"suspect", s.suspect}};
  const EngineSeen engine = EngineOf(s);
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

std::string JobStatusToText(const JobStatus& s, Clock::WallTime now, Duration lease_timeout) {
  std::string out;
  auto line = [&out](const std::string& label, const std::string& text) {
    char head[24];
    std::snprintf(head, sizeof head, "%-17s", label.c_str());
    out += head + text + "\n";
  };
  if (s.empty()) {
    return "job " + s.job + ": nothing in " + s.store +
           " yet: no lease, no snapshot, no events.\n"
           "It has not run, or --job / --store name another job or store.\n";
  }
  out += "job " + s.job + " in " + s.store + "\n";

  if (!s.lease) {
    line("lease", "none: no instance has taken this job");
  } else {
    const LeaseState& l = *s.lease;
    const std::string heartbeat = "heartbeat " + (l.heartbeat.empty() ? "?" : l.heartbeat) + " (" +
                                  AgoText(AgeOf(l.heartbeat, now)) + ")";
    if (l.released) {
      line("lease", "released by " + l.instance + " (generation " + std::to_string(l.generation) +
                        "), " + heartbeat);
    } else {
      std::string text = "held by " + l.instance +
                         (l.agent ? " (agent pid " + std::to_string(l.agent->pid) + ", generation "
                                  : " (generation ") +
                         std::to_string(l.generation) + "), " + heartbeat;
      if (LeaseIsStale(l, now, lease_timeout)) {
        text += "; STALE: older than lease.timeout " + FormatDuration(lease_timeout) +
                ", so the next instance may take over";
      }
      line("lease", text);
    }
  }

  if (!s.newest) {
    line("newest snapshot", s.committed == 0 ? "none" : "none readable (see problems)");
  } else {
    const Manifest& m = *s.newest;
    std::string text =
        SeqName(m.seq) + ", created " + m.created + " (" + AgoText(AgeOf(m.created, now)) +
        ") by " + (m.instance.empty() ? "?" : m.instance) + ": " + std::to_string(m.files.size()) +
        (m.files.size() == 1 ? " file, " : " files, ") + HumanBytes(m.TotalSize()) + ", stored " +
        HumanBytes(m.TotalStored()) + ", step " +
        (m.step ? std::to_string(*m.step) : std::string("-"));
    if (m.index) text += ", index " + std::to_string(*m.index);
    if (m.attempt) text += ", attempt " + std::to_string(*m.attempt);
    line("newest snapshot", text);
    line("", std::to_string(s.committed) + " committed snapshot" + (s.committed == 1 ? "" : "s") +
                 " in the store");
  }

  if (const EngineSeen engine = EngineOf(s); engine.index || engine.attempt) {
    line("engine",
         std::string("index ") + (engine.index ? std::to_string(*engine.index) : std::string("-")) +
             ", attempt " + (engine.attempt ? std::to_string(*engine.attempt) : std::string("-")) +
             " (the newest run that recorded them)");
  }

  if (!s.suspect.empty()) {
    std::string seqs;
    for (uint64_t seq : s.suspect) seqs += (seqs.empty() ? "" : ", ") + SeqName(seq);
    line("suspect", seqs + ": the trainer could not resume from " +
                        (s.suspect.size() == 1 ? "it" : "them") + " (spotguard unsuspect SEQ)");
  }
  if (auto warning = AttemptBudgetWarning(EngineOf(s).attempt, s.attempt_cap)) {
    line("WARNING", *warning);
  }
  if (!s.complete) {
    line("complete", "no");
  } else if (!s.completion) {
    line("complete", "yes (the marker does not read back; see problems)");
  } else {
    const JobCompletion& c = *s.completion;
    std::string text = "yes, at " + (c.time.empty() ? "?" : c.time) + " by " +
                       (c.instance.empty() ? "?" : c.instance);
    if (c.seq) text += ", final snapshot " + SeqName(*c.seq);
    if (c.step) text += ", step " + std::to_string(*c.step);
    line("complete", text);
  }

  if (s.interruption_count == 0) {
    line("interruptions", "none recorded");
  } else {
    line("interruptions", std::to_string(s.interruption_count) + " recorded; newest first:");
    for (const nlohmann::json& e : s.interruptions) {
      out += "  " + Field(e, "time") + "  " + Field(e, "kind") + "  " + Field(e, "instance");
      const std::string details = EventDetails(e);
      out += details.empty() ? "\n" : "  " + details + "\n";
    }
  }

  if (s.recent_events.empty()) {
    line("recent events", "none");
  } else {
    line("recent events", "the last " + std::to_string(s.recent_events.size()) + " of " +
                              std::to_string(s.event_count) + ", newest first:");
    for (const nlohmann::json& e : s.recent_events) {
      char kind[16];
      std::snprintf(kind, sizeof kind, "%-10s", Field(e, "kind").c_str());
      out += "  " + Field(e, "time") + "  " + kind + "  " + Field(e, "instance");
      const std::string details = EventDetails(e);
      out += details.empty() ? "\n" : "  " + details + "\n";
    }
  }

  for (const std::string& p : s.problems) out += "problem: " + p + "\n";
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
