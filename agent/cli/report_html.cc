#include "agent/cli/report_html.h"

#include <algorithm>
#include <sstream>

#include "agent/ledger/goodput.h"
#include "agent/ledger/ledger.h"
#include "common/log.h"

namespace sg {
namespace {

constexpr double kWidth = 1000, kLabel = 90, kLane = 46, kBar = 22;

std::string Esc(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Str(const nlohmann::ordered_json& j) {
  return j.is_string() ? j.get<std::string>() : (j.is_null() ? "" : j.dump());
}

constexpr const char* kStyle = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px}
.summary span{margin-right:18px} svg text{font:11px system-ui,sans-serif}
.c-productive{fill:#2e9e44}.c-lost_work{fill:url(#lost)}.c-restore{fill:#3b7dd8}
.c-startup{fill:#9aa5b1}.c-waiting{fill:#d9dde2}.c-checkpoint_answer{fill:#f0ad4e}
.c-shutdown{fill:#6c757d}.gap{stroke:#999;stroke-dasharray:3 3}
.notice{stroke:#c00;stroke-width:2}.commit{fill:#fff;stroke:#111}
.attempt:hover rect{opacity:.8} table{border-collapse:collapse}
td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:right}
td:first-child,th:first-child,td.l{text-align:left} tr.hl{background:#fff6d5}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}
)";

// x of time `t` on the timeline.
struct Scale {
  LedgerMs first = 0, last = 1;
  double X(LedgerMs t) const {
    const double span = static_cast<double>(std::max<LedgerMs>(1, last - first));
    return kLabel + (kWidth - kLabel - 10) * static_cast<double>(t - first) / span;
  }
  double X(const nlohmann::ordered_json& time) const {
    return X(ParseLedgerTime(Str(time)).value_or(first));
  }
};

void Attempt(std::ostream& o, const nlohmann::ordered_json& a, const Scale& sc, double y) {
  o << "<g class=\"attempt\" data-attempt=\"" << Esc(Str(a["id"])) << "\"><title>"
    << Esc(Str(a["id"])) << " " << Esc(Str(a["instance_type"])) << " ended: "
    << Esc(Str(a["exit_reason"])) << "</title>";
  const LedgerMs begin = ParseLedgerTime(Str(a["begin"])).value_or(sc.first);
  for (const auto& s : a["segments"]) {
    const LedgerMs from = ParseLedgerTime(Str(s["from"])).value_or(begin);
    const double x0 = sc.X(s["from"]), x1 = sc.X(s["to"]);
    if (from < begin) {  // the wait before the attempt: nothing ran
      o << Format("<line class=\"gap\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>",
                  x0, x1, y + kBar / 2, y + kBar / 2);
      continue;
    }
    o << Format(
        "<rect class=\"seg c-{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\"/>",
        Esc(Str(s["cause"])), x0, y, std::max(0.0, x1 - x0), kBar);
  }
  if (!a["notice"].is_null()) {
    const double x = sc.X(a["notice"]);
    o << Format("<line class=\"notice\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\">"
                "<title>notice {}</title></line>",
                x, x, y - 4, y + kBar + 4, Esc(Str(a["notice"])));
  }
  for (const auto& c : a["commits"]) {
    const double x = sc.X(c["time"]);
    o << Format("<circle class=\"commit\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\"><title>commit, "
                "step {}</title></circle><text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}"
                "</text>",
                x, y + kBar / 2, Esc(Str(c["step"])), x, y + kBar + 11, Esc(Str(c["step"])));
  }
  o << "</g>";
}

void Timeline(std::ostream& o, const nlohmann::ordered_json& r, const Scale& sc) {
  const auto& nodes = r["nodes"];
  const double height = 20 + kLane * static_cast<double>(nodes.size());
  o << Format("<svg id=\"timeline\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">", kWidth,
              height, kWidth, height);
  o << "<defs><pattern id=\"lost\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
       "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f3c4c2\"/>"
       "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#d9534f\" stroke-width=\"3\"/>"
       "</pattern></defs>";
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string node = Str(nodes[i]);
    const double y = 10 + kLane * static_cast<double>(i);
    o << "<g class=\"lane\" data-node=\"" << Esc(node) << "\">";
    o << Format("<text x=\"4\" y=\"{:.1f}\">node {}</text>", y + kBar / 2 + 4, Esc(node));
    for (const auto& a : r["attempts"]) {
      if (Str(a["node"]) == node) Attempt(o, a, sc, y);
    }
    o << "</g>";
  }
  o << "</svg>";
}

void Breakdown(std::ostream& o, const nlohmann::ordered_json& r) {
  const double total = r["node_seconds"].get<double>();
  o << "<svg id=\"breakdown\" width=\"" << kWidth << "\" height=\"34\">";
  double x = 0;
  for (size_t i = 0; i < kCauseCount; ++i) {
    const std::string name(CauseName(static_cast<Cause>(i)));
    const double s = r["goodput"][name].get<double>();
    const double w = total > 0 ? kWidth * s / total : 0;
    o << Format("<rect class=\"c-{}\" x=\"{:.1f}\" y=\"4\" width=\"{:.2f}\" height=\"26\">"
                "<title>{} {:.1f} s</title></rect>",
                name, x, w, name, s);
    x += w;
  }
  o << "</svg><div class=\"legend\">";
  for (size_t i = 0; i < kCauseCount; ++i) {
    const std::string name(CauseName(static_cast<Cause>(i)));
    const double s = r["goodput"][name].get<double>();
    o << Format("<span><svg width=\"12\" height=\"12\"><rect class=\"c-{}\" width=\"12\" "
                "height=\"12\"/></svg> {} {:.1f} s ({:.1f}%)</span>",
                name, name, s, total > 0 ? 100 * s / total : 0.0);
  }
  o << "</div>";
}

// "$0.4523/h measured" and the attempt's cost; "-" without a price.
std::string PriceCells(const nlohmann::ordered_json& a) {
  if (!a.contains("cost_usd") || a["cost_usd"].is_null()) return "<td>-</td><td>-</td>";
  return Format("<td class=\"price\">${:.4f}/h {}</td><td>${:.2f}</td>",
                a["price_usd_per_hour"].get<double>(), Esc(Str(a["price_source"])),
                a["cost_usd"].get<double>());
}

// The job's cost in the summary, and which prices it came from.
std::string CostSummary(const nlohmann::ordered_json& cost) {
  if (cost.is_null()) return "<span id=\"cost\">cost unknown (no prices)</span>";
  return Format("<span id=\"cost\">cost ${:.2f}, on demand ${:.2f}, saving ${:.2f} ({:.0f}%); "
                "prices {}</span>",
                cost["usd"].get<double>(), cost["on_demand_usd"].get<double>(),
                cost["saving_usd"].get<double>(), 100 * cost["saving_fraction"].get<double>(),
                Esc(Str(cost["prices"])));
}

void Table(std::ostream& o, const nlohmann::ordered_json& r) {
  o << "<table id=\"attempts\"><tr><th>node</th><th>attempt</th><th>instance</th><th>type</th>"
       "<th>zone</th><th>lifecycle</th><th>begin</th><th>seconds</th><th>productive</th>"
       "<th>lost</th><th>restore</th><th>ended</th><th>price</th><th>cost</th></tr>";
  for (const auto& a : r["attempts"]) {
    o << "<tr data-attempt=\"" << Esc(Str(a["id"])) << "\"><td>" << Esc(Str(a["node"]))
      << "</td><td class=\"l\">" << Esc(Str(a["id"])) << "</td><td class=\"l\">"
      << Esc(Str(a["instance"])) << "</td><td class=\"l\">" << Esc(Str(a["instance_type"]))
      << "</td><td class=\"l\">" << Esc(Str(a["availability_zone"])) << "</td><td class=\"l\">"
      << Esc(Str(a["lifecycle"])) << "</td><td class=\"l\">" << Esc(Str(a["begin"])) << "</td>"
      << Format("<td>{:.1f}</td><td>{:.1f}</td><td>{:.1f}</td><td>{:.1f}</td>",
                a["seconds"].get<double>(), a["causes"]["productive"].get<double>(),
                a["causes"]["lost_work"].get<double>(), a["causes"]["restore"].get<double>())
      << "<td class=\"l\">" << Esc(Str(a["exit_reason"])) << "</td>" << PriceCells(a) << "</tr>";
  }
  o << "</table>";
}

// Marks the page as rendered (the suite reads the attribute from the DOM)
// and links a bar to its row.
constexpr const char* kScript = R"(
(function(){
  var lanes=document.querySelectorAll('#timeline .lane').length;
  var bars=document.querySelectorAll('#timeline .attempt').length;
  document.body.setAttribute('data-rendered','lanes='+lanes+' bars='+bars);
  document.querySelectorAll('#timeline .attempt').forEach(function(g){
    var row=document.querySelector('#attempts tr[data-attempt="'+g.getAttribute('data-attempt')+'"]');
    if(!row)return;
    g.addEventListener('mouseenter',function(){row.classList.add('hl');});
    g.addEventListener('mouseleave',function(){row.classList.remove('hl');});
  });
})();
)";

}  // namespace

std::string ReportToHtml(const nlohmann::ordered_json& r) {
  std::ostringstream o;
  const std::string job = Esc(Str(r["job"]));
  o << "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>spotguard report: "
    << job << "</title><style>" << kStyle << "</style></head><body>";
  o << "<h1>Job " << job << "</h1><div class=\"summary\">";
  o << Format("<span>{} attempts on {} nodes</span>", r["attempts"].size(), r["nodes"].size());
  o << Format("<span>goodput {:.1f}%</span>", 100 * r["goodput"]["fraction"].get<double>());
  o << Format("<span>{} interruptions</span>", r["interruptions"].get<int>());
  o << CostSummary(r["cost"]);
  if (!r["first"].is_null()) {
    o << "<span>" << Esc(Str(r["first"])) << " .. " << Esc(Str(r["last"])) << "</span>";
  }
  o << "</div><h2>Timeline</h2>";
  Scale sc;
  if (!r["first"].is_null()) {
    sc.first = ParseLedgerTime(Str(r["first"])).value_or(0);
    sc.last = ParseLedgerTime(Str(r["last"])).value_or(sc.first + 1);
  }
  Timeline(o, r, sc);
  o << "<h2>Goodput by cause</h2>";
  Breakdown(o, r);
  o << "<h2>Attempts</h2>";
  Table(o, r);
  o << "<script>" << kScript << "</script></body></html>\n";
  return o.str();
}

}  // namespace sg
