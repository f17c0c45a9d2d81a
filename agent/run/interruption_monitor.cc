#include "agent/run/interruption_monitor.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <ctime>

#include "common/aws_credentials.h"
#include "common/log.h"
#include "common/strings.h"

namespace sg {
namespace {

using nlohmann::json;
using Kind = InterruptionEvent::Kind;

Status Malformed(std::string what) { return Status::Corruption("malformed body: " + what); }

// Parses a JSON body, or says where it stopped making sense.
StatusOr<json> ParseJsonBody(std::string_view body) {
  try {
    return json::parse(body);
  } catch (const json::parse_error& e) {
    // e.byte counts from 1 and runs one past the end when the text stops early.
    const std::string where =
        e.byte > body.size()
            ? "it ends after " + std::to_string(body.size()) + " bytes"
            : "error at byte " + std::to_string(e.byte) + " of " + std::to_string(body.size());
    return Malformed("not valid JSON (" + where + "): \"" + PrintableExcerpt(body) + "\"");
  } catch (const json::exception&) {
    // out_of_range.406: a number too big for a double, such as 1e400.
    return Malformed("a number in it is out of range: \"" + PrintableExcerpt(body) + "\"");
  }
}

// The string member `name` of `object`, or an error naming what is wrong.
StatusOr<std::string> StringField(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end()) return Malformed(std::string("no \"") + name + "\"");
  if (!it->is_string()) {
    return Malformed(std::string("\"") + name + "\" is not a string: " +
                     PrintableExcerpt(it->dump(-1, ' ', false, json::error_handler_t::replace)));
  }
  return it->get<std::string>();
}

StatusOr<Clock::WallTime> UtcField(const json& object, const char* name) {
  SG_ASSIGN_OR_RETURN(std::string text, StringField(object, name));
  auto t = ParseIso8601(text);
  if (!t.ok() || text.empty() || text.back() != 'Z') {
    return Malformed(std::string("\"") + name + "\" is \"" + PrintableExcerpt(text) +
                     "\", not a UTC time like 2026-11-22T08:22:00Z");
  }
  return *t;
}

bool IsLifecycleState(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == ':';
  });
}

std::string FormatSeconds(Clock::MonoTime::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}

}  // namespace

std::string_view InterruptionKindName(Kind kind) {
  switch (kind) {
    case Kind::kNotice:
      return "notice";
    case Kind::kRebalance:
      return "rebalance";
    case Kind::kLifecycle:
      return "lifecycle";
    case Kind::kScheduled:
      return "scheduled";
  }
  return "unknown";
}

bool InterruptionEvent::IsNotice() const {
  if (kind == Kind::kNotice) return true;
  return kind == Kind::kLifecycle && (action == "Terminated" || action == "Warmed:Terminated");
}

nlohmann::ordered_json InterruptionEvent::ToJson() const {
  nlohmann::ordered_json j;
  j["kind"] = InterruptionKindName(kind);
  j["action"] = action;
  j["time"] = time ? nlohmann::ordered_json(FormatUtc(*time)) : nlohmann::ordered_json(nullptr);
  j["notice"] = IsNotice();
  if (kind == Kind::kNotice && time) {
    j["seconds_left"] = std::chrono::duration_cast<std::chrono::seconds>(*time - observed).count();
  }
  if (!event_id.empty()) j["event_id"] = event_id;
  j["observed"] = FormatUtc(observed, /*millis=*/true);
  j["source"] = source;
  auto detail = nlohmann::ordered_json::parse(raw, nullptr, /*allow_exceptions=*/false);
  j["detail"] = detail.is_discarded() ? nlohmann::ordered_json(raw) : detail;
  return j;
}

std::string InterruptionEvent::Describe() const {
  const std::string at = time ? FormatUtc(*time) : "an unknown time";
  switch (kind) {
    case Kind::kNotice: {
      std::string s = "spot interruption notice: " + action + " at " + at;
      if (time) s += " (" + FormatSeconds(*time - observed) + " left)";
      return s;
    }
    case Kind::kRebalance:
      return "rebalance recommendation: elevated risk of interruption (made at " + at + ")";
    case Kind::kLifecycle:
      return "Auto Scaling target lifecycle state: " + action +
             (IsNotice() ? " (the instance is being terminated)" : "");
    case Kind::kScheduled:
      return "scheduled event " + event_id + ": " + action + " not before " + at;
  }
  return action;
}

InterruptionMonitor::InterruptionMonitor(MetadataService& imds, Clock& clock, Options options)
    : imds_(imds), clock_(clock), options_(std::move(options)) {}

void InterruptionMonitor::Warn(const std::string& message) {
  if (options_.warn) {
    options_.warn(message);
  } else {
    LogWarn("{}", message);
  }
}

void InterruptionMonitor::Info(const std::string& message) {
  if (options_.info) {
    options_.info(message);
  } else {
    LogInfo("{}", message);
  }
}

std::vector<InterruptionEvent> InterruptionMonitor::PollOnce() {
  using Handler = SourceResult (InterruptionMonitor::*)(const StatusOr<std::string>&);
  static constexpr std::array<std::pair<std::string_view, Handler>, 4> kSources = {{
      {kNoticePath, &InterruptionMonitor::OnNotice},
      {kLifecyclePath, &InterruptionMonitor::OnLifecycle},
      {kRebalancePath, &InterruptionMonitor::OnRebalance},
      {kScheduledPath, &InterruptionMonitor::OnScheduled},
  }};
  now_ = clock_.Now();
  std::vector<InterruptionEvent> events;
  std::string poll_error;
  for (const auto& [path, handler] : kSources) {
    StatusOr<std::string> body = imds_.Get(path);
    if (!body.ok() && !body.status().Is(StatusCode::kNotFound)) {
      RecordFailure(path, body.status());
      poll_error = std::string(path) + ": " + body.status().message();
      // Nothing answered (or IMDS is off): the other sources would only wait
      // for the same timeouts. They are read again at the next poll.
      const std::string& reason = body.status().reason();
      if (reason == kImdsNoAnswer || reason == kImdsDisabled) break;
      continue;
    }
    SourceResult result = (this->*handler)(body);
    for (InterruptionEvent& e : result.events) {
      e.observed = now_;
      e.source = std::string(path);
      events.push_back(std::move(e));
    }
    if (result.problem.ok()) {
      RecordSuccess(path);
    } else {
      RecordFailure(path, result.problem);
      poll_error = std::string(path) + ": " + result.problem.message();
    }
  }
  ++health_.polls;
  if (poll_error.empty()) {
    health_.consecutive_failed_polls = 0;
    health_.last_clean_poll = now_;
  } else {
    ++health_.failed_polls;
    ++health_.consecutive_failed_polls;
  }
  health_.last_error = poll_error;
  return events;
}

void InterruptionMonitor::Run(const PollCallback& on_poll, const std::atomic<bool>& stop) {
  constexpr std::chrono::nanoseconds kStopCheck = std::chrono::milliseconds(100);
  while (!stop.load()) {
    const Clock::MonoTime next = clock_.Monotonic() + options_.poll_interval;
    std::vector<InterruptionEvent> events = PollOnce();
    if (!on_poll(events)) return;
    for (auto now = clock_.Monotonic(); now < next && !stop.load(); now = clock_.Monotonic()) {
      clock_.SleepFor(std::min<std::chrono::nanoseconds>(next - now, kStopCheck));
    }
  }
}

void InterruptionMonitor::RecordFailure(std::string_view path, const Status& error) {
  SourceState& s = sources_[std::string(path)];
  const Clock::MonoTime mono = clock_.Monotonic();
  const std::string label = "IMDS " + std::string(path) + ": ";
  if (s.consecutive_failures == 0 || s.failing_code != error.code()) {
    // A new run of failures, or a different kind of failure: say what it is, once.
    if (s.consecutive_failures == 0) s.failing_since = mono;
    s.failing_code = error.code();
    s.last_reminder = mono;
    Warn(label + error.message() + "; polling continues every " +
         FormatDuration(options_.poll_interval));
  } else if (mono - s.last_reminder >= options_.error_report_interval) {
    s.last_reminder = mono;
    Warn(label + "still failing: " + std::to_string(s.consecutive_failures + 1) +
         " polls in a row over " + FormatSeconds(mono - s.failing_since) +
         "; last error: " + error.message());
  }
  ++s.consecutive_failures;
  if (path == kNoticePath && !s.said_unseeable && mono - s.failing_since >= options_.unseeable_after) {
    s.said_unseeable = true;
    Warn("interruption notices cannot be seen on this machine: " + label +
         "not readable for " + FormatSeconds(mono - s.failing_since) + " (" +
         std::to_string(s.consecutive_failures) + " polls); last error: " + error.message());
  }
}

void InterruptionMonitor::RecordSuccess(std::string_view path) {
  auto it = sources_.find(path);
  if (it == sources_.end() || it->second.consecutive_failures == 0) return;
  SourceState& s = it->second;
  Info("IMDS " + std::string(path) + ": readable again after " +
       std::to_string(s.consecutive_failures) + " failed polls over " +
       FormatSeconds(clock_.Monotonic() - s.failing_since) +
       (s.said_unseeable ? "; the metadata service is now reachable and interruption notices "
                           "are seen again"
                         : ""));
  s = SourceState{};
}

InterruptionMonitor::SourceResult InterruptionMonitor::OnNotice(const StatusOr<std::string>& body) {
  if (!body.ok()) return SourceResult{};  // 404: no notice
  SG_ASSIGN_OR_RETURN(json j, ParseJsonBody(*body));
  if (!j.is_object()) return Malformed("not a JSON object: \"" + PrintableExcerpt(*body) + "\"");
  SG_ASSIGN_OR_RETURN(std::string action, StringField(j, "action"));
  if (action != "terminate" && action != "stop" && action != "hibernate") {
    return Malformed("\"action\" is \"" + PrintableExcerpt(action) +
                     "\", expected terminate, stop or hibernate");
  }
  SG_ASSIGN_OR_RETURN(Clock::WallTime time, UtcField(j, "time"));
  std::vector<InterruptionEvent> out;
  if (notices_seen_.insert(action + " " + j["time"].get<std::string>()).second) {
    InterruptionEvent e;
    e.kind = Kind::kNotice;
    e.action = action;
    e.time = time;
    e.raw = *body;
    out.push_back(std::move(e));
  }
  return out;
}

InterruptionMonitor::SourceResult InterruptionMonitor::OnLifecycle(
    const StatusOr<std::string>& body) {
  // 404: not in an Auto Scaling group; nothing to say, and the last state stays.
  if (!body.ok()) return SourceResult{};
  const std::string state(Trim(*body));
  if (!IsLifecycleState(state)) {
    return Malformed("\"" + PrintableExcerpt(*body) + "\" is not a lifecycle state");
  }
  std::vector<InterruptionEvent> out;
  if (state != lifecycle_state_) {
    lifecycle_state_ = state;
    InterruptionEvent e;
    e.kind = Kind::kLifecycle;
    e.action = state;
    e.raw = state;
    out.push_back(std::move(e));
  }
  return out;
}

InterruptionMonitor::SourceResult InterruptionMonitor::OnRebalance(
    const StatusOr<std::string>& body) {
  if (!body.ok()) return SourceResult{};
  SG_ASSIGN_OR_RETURN(json j, ParseJsonBody(*body));
  if (!j.is_object()) return Malformed("not a JSON object: \"" + PrintableExcerpt(*body) + "\"");
  SG_ASSIGN_OR_RETURN(Clock::WallTime time, UtcField(j, "noticeTime"));
  std::vector<InterruptionEvent> out;
  if (rebalances_seen_.insert(j["noticeTime"].get<std::string>()).second) {
    InterruptionEvent e;
    e.kind = Kind::kRebalance;
    e.action = "rebalance";
    e.time = time;
    e.raw = *body;
    out.push_back(std::move(e));
  }
  return out;
}

InterruptionMonitor::SourceResult InterruptionMonitor::OnScheduled(
    const StatusOr<std::string>& body) {
  if (!body.ok() || Trim(*body).empty()) return SourceResult{};
  SG_ASSIGN_OR_RETURN(json j, ParseJsonBody(*body));
  if (!j.is_array()) return Malformed("not a JSON list: \"" + PrintableExcerpt(*body) + "\"");
  std::vector<InterruptionEvent> out;
  std::string problems;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& item = j[i];
    auto fail = [&](const std::string& what) {
      problems += (problems.empty() ? "" : "; ") + ("event " + std::to_string(i) + ": " + what);
    };
    if (!item.is_object()) {
      fail("not a JSON object");
      continue;
    }
    auto id = StringField(item, "EventId");
    auto code = StringField(item, "Code");
    if (!id.ok() || id->empty()) {
      fail("no \"EventId\" string");
      continue;
    }
    if (!code.ok()) {
      fail("no \"Code\" string");
      continue;
    }
    std::optional<Clock::WallTime> not_before;
    if (item.contains("NotBefore")) {
      auto text = StringField(item, "NotBefore");
      auto t = text.ok() ? ParseImdsEventTime(*text) : StatusOr<Clock::WallTime>(text.status());
      if (!t.ok()) {
        fail("\"NotBefore\" is not a time like \"21 Jan 2019 09:00:43 GMT\"");
        continue;
      }
      not_before = *t;
    }
    const std::string state =
        item.contains("State") && item["State"].is_string() ? item["State"].get<std::string>() : "";
    const std::string description = item.contains("Description") && item["Description"].is_string()
                                        ? item["Description"].get<std::string>()
                                        : "";
    // Finished and cancelled events stay listed for a while; they announce nothing.
    if (state == "completed" || state == "canceled" || description.starts_with("[Completed]") ||
        description.starts_with("[Canceled]")) {
      continue;
    }
    if (!scheduled_seen_.insert(*id).second) continue;
    InterruptionEvent e;
    e.kind = Kind::kScheduled;
    e.action = *code;
    e.time = not_before;
    e.event_id = *id;
    e.raw = item.dump(-1, ' ', false, json::error_handler_t::replace);
    out.push_back(std::move(e));
  }
  // The readable events are reported even when others are not readable.
  SourceResult result(std::move(out));
  if (!problems.empty()) result.problem = Malformed(problems);
  return result;
}

StatusOr<Clock::WallTime> ParseImdsEventTime(std::string_view text) {
  static constexpr std::string_view kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const auto bad = [&] {
    return Status::InvalidArgument("\"" + PrintableExcerpt(text) +
                                   "\" is not a time like \"21 Jan 2019 09:00:43 GMT\"");
  };
  const std::vector<std::string> parts = Split(Trim(text), ' ');
  if (parts.size() != 5 || parts[4] != "GMT") return bad();
  auto number = [](std::string_view s, int lo, int hi) -> std::optional<int> {
    int v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty() || v < lo || v > hi) {
      return std::nullopt;
    }
    return v;
  };
  std::tm tm{};
  auto day = number(parts[0], 1, 31);
  auto year = number(parts[2], 1970, 9999);
  const std::vector<std::string> hms = Split(parts[3], ':');
  if (!day || !year || hms.size() != 3) return bad();
  auto h = number(hms[0], 0, 23), m = number(hms[1], 0, 59), s = number(hms[2], 0, 60);
  auto month = std::find(std::begin(kMonths), std::end(kMonths), parts[1]);
  if (!h || !m || !s || month == std::end(kMonths)) return bad();
  tm.tm_mday = *day;
  tm.tm_mon = static_cast<int>(month - std::begin(kMonths));
  tm.tm_year = *year - 1900;
  tm.tm_hour = *h;
  tm.tm_min = *m;
  tm.tm_sec = *s;
  auto t = WallTimeFromUtc(tm);
  if (!t) return bad();
  return *t;
}

}  // namespace sg
