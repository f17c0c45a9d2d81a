#include "agent/ledger/ledger.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>

#include "agent/ledger/events.h"
#include "common/aws_credentials.h"
#include "common/clock.h"

namespace sg {
namespace {

std::string Str(const nlohmann::json& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  return "";
}

std::optional<int64_t> Int(const nlohmann::json& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

std::string NodeOf(const nlohmann::json& e) {
  if (std::string n = Str(e, "node"); !n.empty()) return n;
  if (std::string i = Str(e, "index"); !i.empty()) return i;
  return "0";
}

void SetOnce(std::optional<LedgerMs>& slot, LedgerMs t) {
  if (!slot) slot = t;
}

void AddCommit(LedgerAttempt& a, const nlohmann::json& e, LedgerMs t) {
  LedgerCommit c;
  c.time = t;
  c.checkpoint_time = ParseLedgerTime(Str(e, "checkpoint_time")).value_or(t);
  c.step = Int(e, "step");
  c.new_bytes = static_cast<uint64_t>(Int(e, "new_bytes").value_or(0));
  c.reused_bytes = static_cast<uint64_t>(Int(e, "reused_bytes").value_or(0));
  a.commits.push_back(c);
}

// A "prices" event's measured price `which` ({"usd_per_hour": ...}); nullopt
// when it could not be read ({"error": ...}).
std::optional<double> MeasuredPrice(const nlohmann::json& e, const char* which) {
  auto p = e.find(which);
  if (p == e.end() || !p->is_object()) return std::nullopt;
  auto usd = p->find("usd_per_hour");
  if (usd == p->end() || !usd->is_number() || usd->get<double>() < 0) return std::nullopt;
  return usd->get<double>();
}

// A group member's rounds: joined, restored, trained, ended.
void ApplyRound(LedgerAttempt& a, const std::string& kind, LedgerMs t) {
  if (kind == "group-joined") {
    a.rounds.emplace_back();
    a.rounds.back().join = t;
  }
  if (a.rounds.empty()) return;
  LedgerRound& r = a.rounds.back();
  if (kind == "restore-start") SetOnce(r.restore_start, t);
  if (kind == "restore-end") SetOnce(r.restore_end, t);
  if (kind == "trainer-start") SetOnce(r.trainer_start, t);
  if (kind == "round-end") SetOnce(r.end, t);
}

// Adds one event, of time t, to its attempt.
void Apply(LedgerAttempt& a, const nlohmann::json& e, LedgerMs t) {
  const std::string kind = Str(e, "kind");
  ApplyRound(a, kind, t);
  if (kind == "agent-start") {
    SetOnce(a.agent_start, t);
    a.instance_type = Str(e, "instance_type");
    a.availability_zone = Str(e, "availability_zone");
    a.lifecycle = Str(e, "lifecycle");
    if (auto launch = ParseLedgerTime(Str(e, "launch_time"))) a.launch = launch;
  } else if (kind == "prices") {
    a.spot_price = MeasuredPrice(e, "spot");
    a.on_demand_price = MeasuredPrice(e, "on_demand");
  } else if (kind == "lease" || kind == "group-joined") {
    SetOnce(a.lease, t);
  } else if (kind == "restore-start") {
    SetOnce(a.restore_start, t);
  } else if (kind == "restore" || kind == "resume-local" || kind == "restore-end") {
    SetOnce(a.restore_end, t);
  } else if (kind == "start" || kind == "trainer-start") {
    a.trainer_starts.push_back(t);
  } else if (kind == "trainer-exit") {
    SetOnce(a.trainer_exit, t);
  } else if (kind == "snapshot") {
    AddCommit(a, e, t);
  } else if (kind == "cadence") {
    auto num = [&](const char* key, double none) {
      auto it = e.find(key);
      return it != e.end() && it->is_number() ? it->get<double>() : none;
    };
    a.cadence.push_back({t, num("interval_seconds", 0), num("cost_seconds", 0),
                         num("mtbf_seconds", 0), num("rate_factor", 1), Str(e, "why")});
  } else if (kind == "checkpoint-request") {
    a.requests.push_back(t);
  } else if (kind == "checkpoint-answer") {
    auto it = e.find("answered");
    a.answers.push_back({t, it != e.end() && it->is_boolean() && it->get<bool>()});
  } else if (kind == "notice") {
    SetOnce(a.notice, t);
  } else if (kind == "trainer-stop") {
    SetOnce(a.trainer_stop, t);
  } else if (kind == "exit") {
    a.exit = t;
    if (auto code = Int(e, "code")) a.exit_code = static_cast<int>(*code);
    a.exit_reason = Str(e, "reason");
  } else if ((kind == "complete" || kind == "failed" || kind == "fenced") && !a.exit) {
    a.exit_reason = kind;
  }
}

}  // namespace

std::optional<LedgerMs> ParseLedgerTime(const std::string& text) {
  if (text.empty()) return std::nullopt;
  auto whole = ParseIso8601(text);
  if (!whole.ok()) return std::nullopt;
  LedgerMs ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(whole->time_since_epoch()).count();
  // ParseIso8601 drops the fraction: its first three digits are the milliseconds.
  if (size_t dot = text.find('.'); dot != std::string::npos) {
    int scale = 100;
    for (size_t i = dot + 1; i < text.size() && scale > 0 && std::isdigit(text[i]); ++i) {
      ms += (text[i] - '0') * scale;
      scale /= 10;
    }
  }
  return ms;
}

std::string FormatLedgerTime(LedgerMs ms) {
  return FormatUtc(Clock::WallTime(std::chrono::milliseconds(ms)), /*millis=*/true);
}

Ledger BuildLedger(const std::vector<nlohmann::json>& events) {
  struct Timed {
    LedgerMs t;
    const nlohmann::json* e;
  };
  std::vector<Timed> timed;
  for (const nlohmann::json& e : events) {
    if (!e.is_object()) continue;
    if (auto t = ParseLedgerTime(Str(e, "time"))) timed.push_back({*t, &e});
  }
  std::stable_sort(timed.begin(), timed.end(),
                   [](const Timed& a, const Timed& b) { return a.t < b.t; });
  std::map<std::string, LedgerAttempt> by_id;
  for (const Timed& x : timed) {
    std::string id = Str(*x.e, "attempt_id");
    if (id.empty()) id = Str(*x.e, "instance");
    auto [it, fresh] = by_id.try_emplace(id);
    LedgerAttempt& a = it->second;
    if (fresh) {
      a.id = id;
      a.node = NodeOf(*x.e);
      a.instance = Str(*x.e, "instance");
      a.first = x.t;
    }
    // A group member learns its rank after its first events.
    if (a.node == "0" && NodeOf(*x.e) != "0") a.node = NodeOf(*x.e);
    a.last = x.t;
    Apply(a, *x.e, x.t);
  }
  Ledger ledger;
  for (auto& [id, a] : by_id) ledger.attempts.push_back(std::move(a));
  std::sort(ledger.attempts.begin(), ledger.attempts.end(),
            [](const LedgerAttempt& a, const LedgerAttempt& b) {
              if (a.node != b.node) {
                // Numeric ranks sort as numbers.
                if (a.node.size() != b.node.size()) return a.node.size() < b.node.size();
                return a.node < b.node;
              }
              return a.first < b.first;
            });
  return ledger;
}

StatusOr<std::vector<nlohmann::json>> ReadJobEvents(ObjectStore& store, const std::string& job) {
  Clock& clock = SystemClock();
  EventLog log(store, clock, job, /*instance=*/"", /*attempt_id=*/"reader");
  SG_ASSIGN_OR_RETURN(std::vector<nlohmann::json> newest_first,
                      log.Recent(std::numeric_limits<size_t>::max()));
  std::reverse(newest_first.begin(), newest_first.end());
  return newest_first;
}

}  // namespace sg
