// ConfigToJson: the effective config as a config file would hold it, with
// what looks like a secret (credentials in URLs, secret-named arguments)
// redacted on request.
#include <regex>

#include "agent/config.h"
#include "agent/config_keys.h"
#include "agent/config_policies.h"
#include "common/signal_names.h"

namespace sg {

using config_detail::kFromSingle;
using config_detail::kOnComplete;
using config_detail::kOnRebalance;
using config_detail::kReuse;
using config_detail::kShuffleNames;

namespace {

using ojson = nlohmann::ordered_json;

// Replaces what looks like a secret with "<redacted>": user:password@ in a URL,
// the value of --api-key=..., and the argument after --password.
std::string RedactUrl(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const size_t host_start = scheme + 3;
  const size_t at = url.find('@', host_start);
  const size_t slash = url.find('/', host_start);
  if (at == std::string::npos || (slash != std::string::npos && at > slash)) return url;
  return url.substr(0, host_start) + "<redacted>" + url.substr(at);
}

bool LooksSecret(std::string_view name) {
  static const std::regex kSecret("(secret|token|passw|api[-_]?key|access[-_]?key|credential)",
                                  std::regex::icase);
  return std::regex_search(name.begin(), name.end(), kSecret);
}

}  // namespace

std::vector<std::string> RedactArgs(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  bool redact_next = false;
  for (const std::string& a : args) {
    if (redact_next) {
      out.push_back("<redacted>");
      redact_next = false;
      continue;
    }
    const size_t eq = a.find('=');
    if (eq != std::string::npos && LooksSecret(a.substr(0, eq))) {
      out.push_back(a.substr(0, eq + 1) + "<redacted>");
    } else if (a.starts_with("-") && eq == std::string::npos && LooksSecret(a)) {
      out.push_back(a);
      redact_next = true;
    } else {
      out.push_back(RedactUrl(a));
    }
  }
  return out;
}

ojson ConfigToJson(const Config& c, bool redact) {
  auto opt = [](const auto& o) -> ojson { return o ? ojson(*o) : ojson(nullptr); };
  auto url = [&](const std::string& u) { return redact ? RedactUrl(u) : u; };
  auto args = [&](const std::vector<std::string>& a) { return redact ? RedactArgs(a) : a; };
  auto choice = [](auto value, const auto& table) {
    for (const auto& [name, v] : table) {
      if (v == value) return std::string(name);
    }
    return std::string();
  };

  ojson j;
  j["job"] = c.job;
  j["store"] = url(c.store);
  j["region"] = opt(c.region);
  j["endpoint"] = c.endpoint ? ojson(url(*c.endpoint)) : ojson(nullptr);
  j["checkpoint_dir"] = c.checkpoint_dir;
  j["preset"] = PresetName(c.preset);
  j["patterns"] = c.patterns;
  j["command"] = args(c.command);
  j["resume_args"] = args(c.resume_args);
  j["checkpoint_signal"] = c.checkpoint_signal ? SignalName(*c.checkpoint_signal) : "none";
  j["stop_signal"] = SignalName(c.stop_signal);
  j["stop_grace"] = FormatDuration(c.stop_grace);
  j["stop_timeout"] = FormatDuration(c.stop_timeout);
  j["upload_interval"] = FormatDuration(c.upload_interval);
  j["settle_time"] = c.settle_time ? ojson(FormatDuration(*c.settle_time)) : ojson(nullptr);
  j["checkpoint_interval"] =
      c.checkpoint_interval ? ojson(FormatDuration(*c.checkpoint_interval)) : ojson(nullptr);
  j["keep"] = c.keep;
  const std::string shuffle = choice(c.compression.shuffle, kShuffleNames);
  j["compression"] = {
      {"level", c.compression.level},
      {"threads", c.compression.threads},
      {"shuffle", shuffle == "2" || shuffle == "4" ? ojson(std::stoi(shuffle)) : ojson(shuffle)}};
  j["reuse"] = choice(c.reuse, kReuse);
  j["imds"] = {{"endpoint", url(c.imds.endpoint)},
               {"poll_interval", FormatDuration(c.imds.poll_interval)}};
  j["on_rebalance"] = choice(c.on_rebalance, kOnRebalance);
  j["on_complete"] = choice(c.on_complete, kOnComplete);
  j["lifecycle_hook"] = opt(c.lifecycle_hook);
  j["restart"] = {{"max", c.restart.max},
                  {"backoff", FormatDuration(c.restart.backoff)},
                  {"max_backoff", FormatDuration(c.restart.max_backoff)}};
  j["lease"] = {{"heartbeat", FormatDuration(c.lease.heartbeat)},
                {"timeout", FormatDuration(c.lease.timeout)}};
  AddPolicyKeys(c, j);
  j["nodes"] = c.nodes;
  j["group"] = {{"port", c.group.port},
                {"address", opt(c.group.address)},
                {"heartbeat", FormatDuration(c.group.heartbeat)},
                {"timeout", FormatDuration(c.group.timeout)},
                {"from_single", choice(c.group.from_single, kFromSingle)}};
  j["log_level"] = LogLevelName(c.log_level);
  j["log_format"] = c.log_format == LogFormat::kJson ? "json" : "text";
  j["log_dir"] = c.log_dir.empty() ? ojson(nullptr) : ojson(c.log_dir);
  j["log_ship_interval"] = FormatDuration(c.log_ship_interval);
  j["log_max_mib"] = c.log_max_mib;
  j["logs_keep"] = c.logs_keep;
  return j;
}

}  // namespace sg
