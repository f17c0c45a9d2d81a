// The rules of the config keys that the generic rows of agent/config/config_rows.h do
// not cover (docs/design.md §3, docs/config.md): the job's {index}, the store
// URL, paths, the preset-dependent defaults, placeholders, URLs and host
// names, compression.shuffle, complete_when and prices.
#include "agent/config/config_policies.h"

#include <algorithm>
#include <csignal>

#include "agent/config/engine_identity.h"
#include "agent/config/placeholders.h"
#include "agent/config/prices.h"
#include "common/signal_names.h"
#include "common/store_url.h"
#include "common/strings.h"

namespace sg::config_detail {
namespace {

const std::vector<std::string> kPlaceholderNames = {
    "resume", "checkpoint_dir", "job",        "attempt",     "index",
    "node_rank", "nnodes",       "master_addr", "master_port", "round"};

bool IsHttpUrl(const std::string& s) {
  return (s.starts_with("http://") && s.size() > 7) || (s.starts_with("https://") && s.size() > 8);
}

}  // namespace

void ReadJob(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  auto s = ReadString(row.key, v, p);
  if (!s) return;
  bool missing_index = false;
  // {index} only: any other brace is refused by the name's shape (agent/config/config.cc).
  c.job = ExpandPlaceholders(*s, [&](std::string_view name) -> std::optional<std::string> {
    if (name != "index") return std::nullopt;
    if (!c.index) missing_index = true;
    return c.index ? std::optional<std::string>(std::to_string(*c.index)) : std::nullopt;
  });
  if (missing_index) p.Add(row.key, "\"" + *s + "\" " + NoIndexMessage(), v.source);
}

void ReadStore(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  auto s = ReadString(row.key, v, p);
  if (!s) return;
  auto url = ParseStoreUrl(*s);
  if (url.ok()) {
    c.store = url->ToString();
  } else {
    p.Add(row.key, url.status().message(), v.source);
  }
}

void ReadCheckpointDir(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  if (auto s = ReadString(row.key, v, p); s && !s->empty()) {
    c.checkpoint_dir = AbsolutePath(*s, /*trim_slash=*/true);
  }
}

void ReadPatterns(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  if (v.value.is_null()) {
    c.patterns = DefaultPatterns(c.preset);
    return;
  }
  auto list = ReadStringList(row.key, v, p);
  if (!list) return;
  if (list->empty()) p.Add(row.key, "must list at least one pattern", v.source);
  for (const std::string& pattern : *list) {
    if (pattern.empty()) p.Add(row.key, "holds an empty pattern", v.source);
  }
  c.patterns = *list;
}

void ReadCheckpointSignal(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  c.checkpoint_signal = std::nullopt;
  if (v.value.is_null()) {
    // Sending a signal the trainer does not handle would kill it, so only
    // caffe (which snapshots on SIGHUP by default) gets one without asking.
    if (c.preset == Preset::kCaffe) c.checkpoint_signal = SIGHUP;
    return;
  }
  auto s = ReadString(row.key, v, p);
  if (!s || ToLower(*s) == "none") return;
  auto signo = ParseSignalName(*s);
  if (!signo.ok()) {
    p.Add(row.key, signo.status().message() + " or \"none\"", v.source);
  } else if (*signo == SIGKILL) {
    p.Add(row.key, "SIGKILL cannot ask for a checkpoint", v.source);
  } else {
    c.checkpoint_signal = *signo;
  }
}

json WriteCheckpointSignal(const KeyRow&, const Config& c, bool) {
  return c.checkpoint_signal ? SignalName(*c.checkpoint_signal) : "none";
}

void CheckPlaceholders(const KeyRow& row, const std::vector<std::string>& args, const Sourced& v,
                       const Config& c, Problems& p) {
  for (size_t i = 0; i < args.size(); ++i) {
    ExpandPlaceholders(args[i], [&](std::string_view name) -> std::optional<std::string> {
      const std::string where = std::string(row.key) + "[" + std::to_string(i) + "]";
      if (std::find(kPlaceholderNames.begin(), kPlaceholderNames.end(), name) ==
          kPlaceholderNames.end()) {
        p.Add(where,
              "unknown placeholder {" + std::string(name) +
                  "} (known: {resume}, {checkpoint_dir}, {job}, {attempt}, {index}, "
                  "{node_rank}, {nnodes}, {master_addr}, {master_port}, {round}; write {{ and "
                  "}} for literal braces)",
              v.source);
      } else if (name == "index" && !c.index) {
        // The engine gave no index, so {index} cannot be expanded.
        p.Add(where, NoIndexMessage(), v.source);
      }
      return std::nullopt;
    });
  }
}

void CheckHttpUrl(const KeyRow& row, const std::string& s, const Sourced& v, Problems& p) {
  if (!IsHttpUrl(s)) p.Add(row.key, "must be an http:// or https:// URL", v.source);
}

void ReadImdsEndpoint(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  auto s = ReadString(row.key, v, p);
  if (!s) return;
  if (!IsHttpUrl(*s)) {
    p.Add(row.key, "must be an http:// or https:// URL, got \"" + *s + "\"", v.source);
  }
  c.imds.endpoint = *s;
  while (c.imds.endpoint.size() > 1 && c.imds.endpoint.back() == '/') c.imds.endpoint.pop_back();
}

void CheckHostName(const KeyRow& row, const std::string& s, const Sourced& v, Problems& p) {
  // Goes into peers' command lines and TF_CONFIG as it is.
  if (s.find_first_of(" \t\n/\"'") != std::string::npos) {
    p.Add(row.key, "must be a host name or IP address, got \"" + s + "\"", v.source);
  }
}

void ReadShuffle(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  const std::string s = v.value.is_number_integer() ? std::to_string(v.value.get<long long>())
                        : v.value.is_string()       ? ToLower(v.value.get<std::string>())
                                                    : "";
  const auto* match = std::find_if(std::begin(kShuffleNames), std::end(kShuffleNames),
                                   [&](const auto& entry) { return entry.first == s; });
  if (match != std::end(kShuffleNames)) {
    c.compression.shuffle = match->second;
  } else {
    p.Add(row.key, "must be \"auto\", \"off\", 2 or 4, got " + Describe(v.value), v.source);
  }
}

json WriteShuffle(const KeyRow&, const Config& c, bool) {
  for (const auto& [name, value] : kShuffleNames) {
    if (value != c.compression.shuffle) continue;
    return name == "2" || name == "4" ? json(std::stoi(std::string(name))) : json(name);
  }
  return "";
}

void ReadCompleteWhen(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  c.complete_when = std::nullopt;
  if (v.value.is_null()) return;
  const std::string key = row.key;
  if (!v.value.is_object() || v.value.empty()) {
    p.Add(key,
          "must be an object such as {\"step_at_least\": 100000} or {\"file_exists\": \"DONE\"}, "
          "got " + Describe(v.value),
          v.source);
    return;
  }
  CompleteWhen when;
  for (const auto& [name, value] : v.value.items()) {
    if (name == "step_at_least") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0) {
        p.Add(key + ".step_at_least", "must be a whole number >= 0, got " + Describe(value),
              v.source);
        continue;
      }
      when.step_at_least = value.get<int64_t>();
    } else if (name == "file_exists") {
      const std::string file = value.is_string() ? value.get<std::string>() : "";
      if (file.empty() || file.front() == '/' || file.find("..") != std::string::npos) {
        p.Add(key + ".file_exists",
              "must be a path relative to checkpoint_dir, without \"..\", got " + Describe(value),
              v.source);
        continue;
      }
      when.file_exists = file;
    } else {
      p.Add(key + "." + name, "unknown condition (known: step_at_least, file_exists)", v.source);
    }
  }
  c.complete_when = when;
}

json WriteCompleteWhen(const KeyRow&, const Config& c, bool) {
  if (!c.complete_when) return nullptr;
  json when = json::object();
  if (c.complete_when->step_at_least) when["step_at_least"] = *c.complete_when->step_at_least;
  if (c.complete_when->file_exists) when["file_exists"] = *c.complete_when->file_exists;
  return when;
}

void CheckPrices(const KeyRow& row, const std::vector<std::string>& prices, const Sourced& v,
                 const Config&, Problems& p) {
  if (auto parsed = ParsePrices(prices); !parsed.ok()) {
    p.Add(row.key, parsed.status().message(), v.source);
  }
}

std::string_view LogFormatName(LogFormat format) {
  return format == LogFormat::kJson ? "json" : "text";
}

}  // namespace sg::config_detail
