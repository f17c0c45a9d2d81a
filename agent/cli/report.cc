#include "agent/cli/report.h"

#include <algorithm>
#include <sstream>

#include "agent/cli/report_cost.h"
#include "common/log.h"

namespace sg {
namespace {

double SecondsOf(int64_t ms) { return static_cast<double>(ms) / 1000.0; }

nlohmann::ordered_json TimeOrNull(const std::optional<LedgerMs>& t) {
  if (!t) return nullptr;
  return FormatLedgerTime(*t);
}

nlohmann::ordered_json Causes(const CauseMs& ms) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (size_t i = 0; i < kCauseCount; ++i) out[CauseName(static_cast<Cause>(i))] = SecondsOf(ms[i]);
  return out;
}

nlohmann::ordered_json AttemptJson(const AttemptGoodput& g, const PriceTable& prices) {
  const LedgerAttempt& a = *g.attempt;
  nlohmann::ordered_json j;
  j["id"] = a.id;
  j["node"] = a.node;
  j["instance"] = a.instance;
  j["instance_type"] = a.instance_type;
  j["availability_zone"] = a.availability_zone;
  j["lifecycle"] = a.lifecycle;
  j["launch"] = TimeOrNull(a.launch);
  j["begin"] = FormatLedgerTime(g.begin);
  j["end"] = FormatLedgerTime(g.end);
  j["seconds"] = SecondsOf(g.end - g.begin);
  j["interrupted"] = g.interrupted;
  j["notice"] = TimeOrNull(a.notice);
  j["exit_reason"] = a.exit_reason;
  j["exit_code"] = a.exit_code ? nlohmann::ordered_json(*a.exit_code) : nullptr;
  j["resumed_step"] = g.resumed_step ? nlohmann::ordered_json(*g.resumed_step) : nullptr;
  j["kept_until"] = TimeOrNull(g.kept_until);
  AddAttemptCost(j, g, prices);
  j["causes"] = Causes(g.ms);
  nlohmann::ordered_json commits = nlohmann::ordered_json::array();
  for (const LedgerCommit& c : a.commits) {
    commits.push_back({{"time", FormatLedgerTime(c.time)},
                       {"step", c.step ? nlohmann::ordered_json(*c.step) : nullptr},
                       {"new_bytes", c.new_bytes},
                       {"reused_bytes", c.reused_bytes}});
  }
  j["commits"] = std::move(commits);
  nlohmann::ordered_json cadence = nlohmann::ordered_json::array();
  for (const LedgerCadence& c : a.cadence) {
    cadence.push_back({{"time", FormatLedgerTime(c.time)},
                       {"interval_seconds", c.interval_seconds},
                       {"cost_seconds", c.cost_seconds},
                       {"mtbf_seconds", c.mtbf_seconds},
                       {"rate_factor", c.rate_factor},
                       {"why", c.why}});
  }
  j["cadence"] = std::move(cadence);
  nlohmann::ordered_json segments = nlohmann::ordered_json::array();
  for (const LedgerSegment& s : g.segments) {
    segments.push_back({{"cause", CauseName(s.cause)},
                        {"from", FormatLedgerTime(s.from)},
                        {"to", FormatLedgerTime(s.to)}});
  }
  j["segments"] = std::move(segments);
  return j;
}

Ledger SinceOnly(Ledger ledger, std::optional<LedgerMs> since) {
  if (!since) return ledger;
  std::erase_if(ledger.attempts, [&](const LedgerAttempt& a) { return a.last < *since; });
  return ledger;
}

}  // namespace

nlohmann::ordered_json BuildReport(const ReportInput& input) {
  const Ledger ledger = SinceOnly(BuildLedger(input.events), input.since);
  const Goodput g = ComputeGoodput(ledger);
  nlohmann::ordered_json r;
  r["job"] = input.job;
  r["first"] = g.attempts.empty() ? nullptr : nlohmann::ordered_json(FormatLedgerTime(g.first));
  r["last"] = g.attempts.empty() ? nullptr : nlohmann::ordered_json(FormatLedgerTime(g.last));
  r["span_seconds"] = SecondsOf(g.last - g.first);
  std::vector<std::string> nodes;
  for (const LedgerAttempt& a : ledger.attempts) {
    if (std::find(nodes.begin(), nodes.end(), a.node) == nodes.end()) nodes.push_back(a.node);
  }
  r["nodes"] = nodes;
  r["node_seconds"] = SecondsOf(g.node_ms);
  r["instance_seconds"] = SecondsOf(g.instance_ms);
  r["interruptions"] = g.interruptions;
  r["cost"] = CostJson(g, input.prices);
  nlohmann::ordered_json goodput = Causes(g.total);
  const int64_t productive = g.total[static_cast<size_t>(Cause::kProductive)];
  goodput["fraction"] = g.node_ms > 0 ? static_cast<double>(productive) / g.node_ms : 0.0;
  r["goodput"] = std::move(goodput);
  r["newest_step"] = g.newest_step ? nlohmann::ordered_json(*g.newest_step) : nullptr;
  r["steps_per_productive_hour"] = g.steps_per_productive_hour;
  r["interruptions_per_instance_day"] = g.interruptions_per_instance_day;
  r["mtbf_hours"] = g.mtbf_hours ? nlohmann::ordered_json(*g.mtbf_hours) : nullptr;
  r["checkpoint_cost"] = {{"samples", g.checkpoint.samples},
                          {"committed_samples", g.checkpoint.commit_samples},
                          {"mean_request_to_answer_seconds", g.checkpoint.mean_request_to_answer},
                          {"max_request_to_answer_seconds", g.checkpoint.max_request_to_answer},
                          {"mean_answer_to_commit_seconds", g.checkpoint.mean_answer_to_commit},
                          {"max_answer_to_commit_seconds", g.checkpoint.max_answer_to_commit}};
  if (g.longest_loss) {
    const AttemptGoodput& worst = g.attempts[*g.longest_loss];
    r["longest_loss"] = {{"attempt", worst.attempt->id},
                         {"node", worst.attempt->node},
                         {"seconds", SecondsOf(worst.ms[static_cast<size_t>(Cause::kLostWork)])}};
  } else {
    r["longest_loss"] = nullptr;
  }
  nlohmann::ordered_json attempts = nlohmann::ordered_json::array();
  for (const AttemptGoodput& a : g.attempts) attempts.push_back(AttemptJson(a, input.prices));
  r["attempts"] = std::move(attempts);
  return r;
}

namespace {

// "checkpoint interval (checkpoint_cadence auto): 3 changes, newest 208 s on
// node 0 at ... (rebalance recommendation; C 60.0 s, MTBF 360 s)"; "" without any.
std::string CadenceText(const nlohmann::ordered_json& attempts) {
  int changes = 0;
  const nlohmann::ordered_json* newest = nullptr;
  std::string node;
  for (const auto& a : attempts) {
    for (const auto& c : a["cadence"]) {
      ++changes;
      if (!newest || c["time"].get<std::string>() >= (*newest)["time"].get<std::string>()) {
        newest = &c;
        node = a["node"].get<std::string>();
      }
    }
  }
  if (!newest) return "";
  const auto& c = *newest;
  return Format(
      "checkpoint interval (checkpoint_cadence auto): {} change{}, newest {:.0f} s on node {} at "
      "{} ({}; C {:.1f} s, MTBF {:.0f} s)\n",
      changes, changes == 1 ? "" : "s", c["interval_seconds"].get<double>(), node,
      c["time"].get<std::string>(), c["why"].get<std::string>(), c["cost_seconds"].get<double>(),
      c["mtbf_seconds"].get<double>());
}

}  // namespace

std::string ReportToText(const nlohmann::ordered_json& r) {
  std::ostringstream out;
  const auto& attempts = r["attempts"];
  out << "job " << r["job"].get<std::string>() << ": " << attempts.size() << " attempt"
      << (attempts.size() == 1 ? "" : "s") << " on " << r["nodes"].size() << " node"
      << (r["nodes"].size() == 1 ? "" : "s");
  if (attempts.empty()) {
    out << "; no events in the store\n";
    return out.str();
  }
  out << ", " << r["first"].get<std::string>() << " .. " << r["last"].get<std::string>() << "\n";
  const double total = r["node_seconds"].get<double>();
  out << Format("goodput: {:.1f}% productive of {:.0f} node-seconds\n",
                100.0 * r["goodput"]["fraction"].get<double>(), total);
  for (size_t i = 0; i < kCauseCount; ++i) {
    const std::string name(CauseName(static_cast<Cause>(i)));
    const double s = r["goodput"][name].get<double>();
    out << Format("  {:<18} {:>10.1f} s  {:>5.1f}%\n", name, s, total > 0 ? 100 * s / total : 0);
  }
  out << CostText(r["cost"]);
  out << Format("interruptions: {} ({:.2f} per instance-day", r["interruptions"].get<int>(),
                r["interruptions_per_instance_day"].get<double>());
  if (!r["mtbf_hours"].is_null()) {
    out << Format(", one every {:.2f} instance-hours", r["mtbf_hours"].get<double>());
  }
  out << ")\n";
  if (!r["newest_step"].is_null()) {
    out << Format("newest committed step {}, {:.0f} steps per productive hour\n",
                  r["newest_step"].get<int64_t>(), r["steps_per_productive_hour"].get<double>());
  }
  const auto& ck = r["checkpoint_cost"];
  if (ck["samples"].get<int>() > 0) {
    out << Format(
        "checkpoint cost ({} answered requests): request to answer {:.1f} s (max {:.1f}), "
        "answer to commit {:.1f} s (max {:.1f})\n",
        ck["samples"].get<int>(), ck["mean_request_to_answer_seconds"].get<double>(),
        ck["max_request_to_answer_seconds"].get<double>(),
        ck["mean_answer_to_commit_seconds"].get<double>(),
        ck["max_answer_to_commit_seconds"].get<double>());
  }
  out << CadenceText(attempts);
  if (const auto& worst = r["longest_loss"]; !worst.is_null() && worst["seconds"].get<double>() > 0) {
    out << Format("longest loss: {:.1f} s of work, attempt {} (node {})\n",
                  worst["seconds"].get<double>(), worst["attempt"].get<std::string>(),
                  worst["node"].get<std::string>());
  }
  out << "attempts:\n";
  for (const auto& a : attempts) {
    out << Format("  node {} {} {} {} {:.0f} s, productive {:.0f} s, lost {:.0f} s, ended: {}{}\n",
                  a["node"].get<std::string>(), a["id"].get<std::string>(),
                  a["instance_type"].get<std::string>().empty() ? "-"
                                                                : a["instance_type"].get<std::string>(),
                  a["lifecycle"].get<std::string>().empty() ? "-" : a["lifecycle"].get<std::string>(),
                  a["seconds"].get<double>(), a["causes"]["productive"].get<double>(),
                  a["causes"]["lost_work"].get<double>(),
                  a["exit_reason"].get<std::string>().empty() ? "?" : a["exit_reason"].get<std::string>(),
                  AttemptCostText(a));
  }
  return out.str();
}

}  // namespace sg
