// `spotguard status`'s text form (agent/cli/status_command.h): one labelled line
// per part of the job's state, then its interruptions, its recent events and
// any problem met while reading them.
#include <cstdio>

#include "agent/run/retry_budget.h"
#include "agent/cli/status_command.h"
#include "agent/cli/status_parts.h"
#include "agent/repo/progress.h"
#include "agent/repo/quarantine.h"
#include "agent/repo/store_names.h"
#include "common/strings.h"

namespace sg {
namespace {

// The text being built, a labelled line at a time.
class StatusLines {
 public:
  void Line(const std::string& label, const std::string& text) {
    char head[24];
    std::snprintf(head, sizeof head, "%-17s", label.c_str());
    out_ += head + text + "\n";
  }
  void Raw(const std::string& text) { out_ += text; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

void LeaseLine(const JobStatus& s, Clock::WallTime now, Duration lease_timeout, StatusLines& out) {
  if (!s.lease) {
    out.Line("lease", "none: no instance has taken this job");
    return;
  }
  const LeaseState& l = *s.lease;
  const std::string heartbeat = "heartbeat " + (l.heartbeat.empty() ? "?" : l.heartbeat) + " (" +
                                status_detail::AgoText(status_detail::AgeOf(l.heartbeat, now)) + ")";
  if (l.released) {
    out.Line("lease", "released by " + l.instance + " (generation " +
                          std::to_string(l.generation) + "), " + heartbeat);
    return;
  }
  std::string text = "held by " + l.instance +
                     (l.agent ? " (agent pid " + std::to_string(l.agent->pid) + ", generation "
                              : " (generation ") +
                     std::to_string(l.generation) + "), " + heartbeat;
  if (status_detail::LeaseIsStale(l, now, lease_timeout)) {
    text += "; STALE: older than lease.timeout " + FormatDuration(lease_timeout) +
            ", so the next instance may take over";
  }
  out.Line("lease", text);
}

void SnapshotLines(const JobStatus& s, Clock::WallTime now, StatusLines& out) {
  if (!s.newest) {
    out.Line("newest snapshot", s.committed == 0 ? "none" : "none readable (see problems)");
  } else {
    const Manifest& m = *s.newest;
    std::string text =
        SeqName(m.seq) + ", created " + m.created + " (" + status_detail::AgoText(status_detail::AgeOf(m.created, now)) +
        ") by " + (m.instance.empty() ? "?" : m.instance) + ": " + std::to_string(m.files.size()) +
        (m.files.size() == 1 ? " file, " : " files, ") + HumanBytes(m.TotalSize()) + ", stored " +
        HumanBytes(m.TotalStored()) + ", step " +
        (m.step ? std::to_string(*m.step) : std::string("-"));
    if (m.index) text += ", index " + std::to_string(*m.index);
    if (m.attempt) text += ", attempt " + std::to_string(*m.attempt);
    out.Line("newest snapshot", text);
    out.Line("", std::to_string(s.committed) + " committed snapshot" +
                     (s.committed == 1 ? "" : "s") + " in the store");
  }
  if (const auto engine = status_detail::EngineOf(s); engine.index || engine.attempt) {
    out.Line("engine",
             std::string("index ") +
                 (engine.index ? std::to_string(*engine.index) : std::string("-")) +
                 ", attempt " +
                 (engine.attempt ? std::to_string(*engine.attempt) : std::string("-")) +
                 " (the newest run that recorded them)");
  }
  if (!s.suspect.empty()) {
    std::string seqs;
    for (uint64_t seq : s.suspect) seqs += (seqs.empty() ? "" : ", ") + SeqName(seq);
    out.Line("suspect", seqs + ": the trainer could not resume from " +
                            (s.suspect.size() == 1 ? "it" : "them") + " (spotguard unsuspect SEQ)");
  }
  if (!s.quarantined.empty()) {
    std::vector<std::string> keys(s.quarantined.begin(), s.quarantined.end());
    const size_t needed = s.newest ? QuarantinedReferences(*s.newest, s.quarantined).size() : 0;
    out.Line("quarantined",
             Join(keys, ", ") + ": found damaged; a restore passes over every snapshot that " +
                 "needs one, and new snapshots store their frames afresh" +
                 (needed > 0 ? " (the newest snapshot needs " + std::to_string(needed) + ")" : ""));
  }
  if (auto warning = AttemptBudgetWarning(status_detail::EngineOf(s).attempt, s.attempt_cap)) {
    out.Line("WARNING", *warning);
  }
}

void CompletionLine(const JobStatus& s, StatusLines& out) {
  if (!s.complete) {
    out.Line("complete", "no");
  } else if (!s.completion) {
    out.Line("complete", "yes (the marker does not read back; see problems)");
  } else {
    const JobCompletion& c = *s.completion;
    std::string text = "yes, at " + (c.time.empty() ? "?" : c.time) + " by " +
                       (c.instance.empty() ? "?" : c.instance);
    if (c.seq) text += ", final snapshot " + SeqName(*c.seq);
    if (c.step) text += ", step " + std::to_string(*c.step);
    out.Line("complete", text);
  }
}

// "  TIME  KIND  INSTANCE  details"; the kind padded to `kind_width`.
void EventLine(const nlohmann::json& e, int kind_width, StatusLines& out) {
  std::string kind = status_detail::Field(e, "kind");
  if (static_cast<int>(kind.size()) < kind_width) kind.resize(kind_width, ' ');
  out.Raw("  " + status_detail::Field(e, "time") + "  " + kind + "  " + status_detail::Field(e, "instance"));
  const std::string details = status_detail::EventDetails(e);
  out.Raw(details.empty() ? "\n" : "  " + details + "\n");
}

void EventLines(const JobStatus& s, StatusLines& out) {
  if (s.interruption_count == 0) {
    out.Line("interruptions", "none recorded");
  } else {
    out.Line("interruptions", std::to_string(s.interruption_count) + " recorded; newest first:");
    for (const nlohmann::json& e : s.interruptions) EventLine(e, 0, out);
  }
  if (s.recent_events.empty()) {
    out.Line("recent events", "none");
  } else {
    out.Line("recent events", "the last " + std::to_string(s.recent_events.size()) + " of " +
                                  std::to_string(s.event_count) + ", newest first:");
    for (const nlohmann::json& e : s.recent_events) EventLine(e, 10, out);
  }
}

}  // namespace

std::string JobStatusToText(const JobStatus& s, Clock::WallTime now, Duration lease_timeout) {
  if (s.empty()) {
    return "job " + s.job + ": nothing in " + s.store +
           " yet: no lease, no snapshot, no events.\n"
           "It has not run, or --job / --store name another job or store.\n";
  }
  StatusLines out;
  out.Raw("job " + s.job + " in " + s.store + "\n");
  LeaseLine(s, now, lease_timeout, out);
  SnapshotLines(s, now, out);
  CompletionLine(s, out);
  EventLines(s, out);
  for (const std::string& p : s.problems) out.Raw("problem: " + p + "\n");
  return out.Take();
}

}  // namespace sg
