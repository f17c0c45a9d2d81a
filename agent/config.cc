// LoadConfig: the values from every source (agent/config_sources.h) checked
// key by key and as a whole (docs/design.md §3), every problem reported at
// once.
#include "agent/config.h"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <regex>

#include "agent/config_keys.h"
#include "agent/config_policies.h"
#include "agent/config_sources.h"
#include "agent/config_values.h"
#include "agent/engine_identity.h"
#include "agent/placeholders.h"
#include "common/signal_names.h"
#include "common/store_url.h"
#include "common/strings.h"

namespace sg {

using config_detail::DefaultPatterns;
using config_detail::Describe;
using config_detail::GatherValues;
using config_detail::kFromSingle;
using config_detail::kOnComplete;
using config_detail::kOnRebalance;
using config_detail::kPresets;
using config_detail::kReuse;
using config_detail::kShuffleNames;
using config_detail::Problems;
using config_detail::ReadChoice;
using config_detail::ReadDuration;
using config_detail::ReadInt;
using config_detail::ReadParsed;
using config_detail::ReadString;
using config_detail::ReadStringList;
using config_detail::Sourced;
using config_detail::SourcedValues;

namespace {

const std::vector<std::string> kPlaceholders = {
    "resume", "checkpoint_dir", "job",        "attempt",     "index",
    "node_rank", "nnodes",       "master_addr", "master_port", "round"};

// `has_index`: the engine gave an index, so {index} can be expanded.
void CheckPlaceholders(const std::string& key, const std::vector<std::string>& args,
                       const std::string& source, bool has_index, Problems& p) {
  for (size_t i = 0; i < args.size(); ++i) {
    ExpandPlaceholders(args[i], [&](std::string_view name) -> std::optional<std::string> {
      const std::string where = key + "[" + std::to_string(i) + "]";
      if (std::find(kPlaceholders.begin(), kPlaceholders.end(), name) == kPlaceholders.end()) {
        p.Add(where,
              "unknown placeholder {" + std::string(name) +
                  "} (known: {resume}, {checkpoint_dir}, {job}, {attempt}, {index}, "
                  "{node_rank}, {nnodes}, {master_addr}, {master_port}, {round}; write {{ and "
                  "}} for literal braces)",
              source);
      } else if (name == "index" && !has_index) {
        p.Add(where, NoIndexMessage(), source);
      }
      return std::nullopt;
    });
  }
}

bool IsHttpUrl(const std::string& s) {
  return (s.starts_with("http://") && s.size() > 7) || (s.starts_with("https://") && s.size() > 8);
}

}  // namespace

ConfigResult LoadConfig(const ConfigSources& sources, const ConfigNeeds& needs) {
  Problems problems;
  SourcedValues values = GatherValues(sources, problems);

  Config c;
  auto at = [&](const char* key) -> const Sourced& { return values.at(key); };
  auto nullable = [&](const char* key) { return at(key).value.is_null(); };

  const EngineIdentityResult engine = ReadEngineIdentity(sources.env);
  for (const std::string& why : engine.problems) problems.Add("environment", why);
  c.index = engine.identity.index;
  c.engine_attempt = engine.identity.attempt;
  bool missing_index = false;  // `job` uses {index} and no variable gives it
  if (auto v = ReadString("job", at("job"), problems)) {
    // {index} only: any other brace is refused by the name's shape below.
    c.job = ExpandPlaceholders(*v, [&](std::string_view name) -> std::optional<std::string> {
      if (name != "index") return std::nullopt;
      if (!c.index) missing_index = true;
      return c.index ? std::optional<std::string>(std::to_string(*c.index)) : std::nullopt;
    });
    if (missing_index) problems.Add("job", "\"" + *v + "\" " + NoIndexMessage(), at("job").source);
  }
  if (auto v = ReadString("store", at("store"), problems)) {
    auto url = ParseStoreUrl(*v);
    if (url.ok()) {
      c.store = url->ToString();
    } else {
      problems.Add("store", url.status().message(), at("store").source);
    }
  }
  for (const char* key : {"region", "endpoint", "lifecycle_hook", "group.address"}) {
    if (nullable(key)) continue;
    auto v = ReadString(key, at(key), problems);
    if (!v) continue;
    if (v->empty()) {
      problems.Add(key, "must not be empty (use null to leave it unset)", at(key).source);
    } else if (std::string_view(key) == "region") {
      c.region = *v;
    } else if (std::string_view(key) == "endpoint") {
      if (!IsHttpUrl(*v)) problems.Add(key, "must be an http:// or https:// URL", at(key).source);
      c.endpoint = *v;
    } else if (std::string_view(key) == "group.address") {
      // Goes into peers' command lines and TF_CONFIG as it is.
      if (v->find_first_of(" \t\n/\"'") != std::string::npos) {
        problems.Add(key, "must be a host name or IP address, got \"" + *v + "\"", at(key).source);
      }
      c.group.address = *v;
    } else {
      c.lifecycle_hook = *v;
    }
  }
  if (auto v = ReadString("checkpoint_dir", at("checkpoint_dir"), problems); v && !v->empty()) {
    std::error_code ec;
    c.checkpoint_dir = std::filesystem::absolute(*v, ec).lexically_normal().string();
    while (c.checkpoint_dir.size() > 1 && c.checkpoint_dir.back() == '/')
      c.checkpoint_dir.pop_back();
  }
  if (!nullable("log_dir")) {
    if (auto v = ReadString("log_dir", at("log_dir"), problems)) {
      if (v->empty()) {
        problems.Add("log_dir", "must not be empty (use null for the default)",
                     at("log_dir").source);
      } else {
        std::error_code ec;
        c.log_dir = std::filesystem::absolute(*v, ec).lexically_normal().string();
        while (c.log_dir.size() > 1 && c.log_dir.back() == '/') c.log_dir.pop_back();
      }
    }
  }
  if (auto v = ReadChoice("preset", at("preset"), kPresets, problems)) c.preset = *v;
  if (nullable("patterns")) {
    c.patterns = DefaultPatterns(c.preset);
  } else if (auto v = ReadStringList("patterns", at("patterns"), problems)) {
    if (v->empty())
      problems.Add("patterns", "must list at least one pattern", at("patterns").source);
    for (const std::string& pat : *v) {
      if (pat.empty()) problems.Add("patterns", "holds an empty pattern", at("patterns").source);
    }
    c.patterns = *v;
  }
  for (const char* key : {"command", "resume_args"}) {
    auto v = ReadStringList(key, at(key), problems);
    if (!v) continue;
    CheckPlaceholders(key, *v, at(key).source, c.index.has_value(), problems);
    (std::string_view(key) == "command" ? c.command : c.resume_args) = *v;
  }
  if (nullable("checkpoint_signal")) {
    // Sending a signal the trainer does not handle would kill it, so only
    // caffe (which snapshots on SIGHUP by default) gets one without asking.
    if (c.preset == Preset::kCaffe) c.checkpoint_signal = SIGHUP;
  } else if (auto v = ReadString("checkpoint_signal", at("checkpoint_signal"), problems)) {
    if (ToLower(*v) != "none") {
      auto signo = ParseSignalName(*v);
      if (!signo.ok()) {
        problems.Add("checkpoint_signal", signo.status().message() + " or \"none\"",
                     at("checkpoint_signal").source);
      } else if (*signo == SIGKILL) {
        problems.Add("checkpoint_signal", "SIGKILL cannot ask for a checkpoint",
                     at("checkpoint_signal").source);
      } else {
        c.checkpoint_signal = *signo;
      }
    }
  }
  if (auto v = ReadString("stop_signal", at("stop_signal"), problems)) {
    auto signo = ParseSignalName(*v);
    if (signo.ok()) {
      c.stop_signal = *signo;
    } else {
      problems.Add("stop_signal", signo.status().message(), at("stop_signal").source);
    }
  }

  struct DurationRule {
    const char* key;
    Duration* out;
    bool zero_ok;
  };
  const DurationRule durations[] = {
      {"stop_grace", &c.stop_grace, true},
      {"stop_timeout", &c.stop_timeout, false},
      {"upload_interval", &c.upload_interval, false},
      {"imds.poll_interval", &c.imds.poll_interval, false},
      {"restart.backoff", &c.restart.backoff, false},
      {"restart.max_backoff", &c.restart.max_backoff, false},
      {"lease.heartbeat", &c.lease.heartbeat, false},
      {"lease.timeout", &c.lease.timeout, false},
      {"log_ship_interval", &c.log_ship_interval, false},
      {"group.heartbeat", &c.group.heartbeat, false},
      {"group.timeout", &c.group.timeout, false},
  };
  std::map<std::string, bool> duration_ok;
  for (const DurationRule& r : durations) {
    auto d = ReadDuration(r.key, at(r.key), problems);
    duration_ok[r.key] = d.has_value();
    if (!d) continue;
    if (!r.zero_ok && d->count() == 0) {
      problems.Add(r.key, "must be longer than 0", at(r.key).source);
      duration_ok[r.key] = false;
    }
    *r.out = *d;
  }
  if (!nullable("settle_time")) {
    if (auto d = ReadDuration("settle_time", at("settle_time"), problems)) c.settle_time = *d;
  }
  if (!nullable("checkpoint_interval")) {
    if (auto d = ReadDuration("checkpoint_interval", at("checkpoint_interval"), problems)) {
      if (d->count() == 0) {
        problems.Add("checkpoint_interval", "must be longer than 0 (use null to turn it off)",
                     at("checkpoint_interval").source);
      }
      c.checkpoint_interval = *d;
    }
  }
  if (duration_ok["restart.backoff"] && duration_ok["restart.max_backoff"] &&
      c.restart.max_backoff < c.restart.backoff) {
    problems.Add("restart.max_backoff",
                 "must be at least restart.backoff (" + FormatDuration(c.restart.backoff) + ")",
                 at("restart.max_backoff").source);
  }
  if (duration_ok["lease.heartbeat"] && duration_ok["lease.timeout"] &&
      c.lease.timeout < 2 * c.lease.heartbeat) {
    problems.Add("lease.timeout",
                 "must be at least twice lease.heartbeat (" + FormatDuration(c.lease.heartbeat) +
                     "), so one late renewal does not lose the lease",
                 at("lease.timeout").source);
  }
  if (duration_ok["group.heartbeat"] && duration_ok["group.timeout"] &&
      c.group.timeout < 2 * c.group.heartbeat) {
    problems.Add("group.timeout",
                 "must be at least twice group.heartbeat (" + FormatDuration(c.group.heartbeat) +
                     "), so one late heartbeat does not end a round",
                 at("group.timeout").source);
  }

  struct IntRule {
    const char* key;
    int* out;
    long long min, max;
  };
  const IntRule ints[] = {
      {"keep", &c.keep, 1, 10000},
      {"compression.level", &c.compression.level, 1, 19},
      {"compression.threads", &c.compression.threads, 0, 1024},
      {"restart.max", &c.restart.max, 0, 1000000},
      {"log_max_mib", &c.log_max_mib, 2, 1000000},
      {"logs_keep", &c.logs_keep, 1, 10000},
      {"nodes", &c.nodes, 1, 1024},
      {"group.port", &c.group.port, 1, 65535},
  };
  for (const IntRule& r : ints) {
    auto n = ReadInt(r.key, at(r.key), problems);
    if (!n) continue;
    if (*n < r.min || *n > r.max) {
      problems.Add(r.key,
                   *n < r.min
                       ? "must be at least " + std::to_string(r.min) + ", got " + std::to_string(*n)
                       : "must be at most " + std::to_string(r.max) + ", got " + std::to_string(*n),
                   at(r.key).source);
      continue;
    }
    *r.out = static_cast<int>(*n);
  }

  {
    const Sourced& v = at("compression.shuffle");
    const std::string s = v.value.is_number_integer() ? std::to_string(v.value.get<long long>())
                          : v.value.is_string()       ? ToLower(v.value.get<std::string>())
                                                      : "";
    const auto* match = std::find_if(std::begin(kShuffleNames), std::end(kShuffleNames),
                                     [&](const auto& entry) { return entry.first == s; });
    if (match != std::end(kShuffleNames)) {
      c.compression.shuffle = match->second;
    } else {
      problems.Add("compression.shuffle",
                   "must be \"auto\", \"off\", 2 or 4, got " + Describe(v.value), v.source);
    }
  }

  if (auto v = ReadString("imds.endpoint", at("imds.endpoint"), problems)) {
    if (!IsHttpUrl(*v)) {
      problems.Add("imds.endpoint", "must be an http:// or https:// URL, got \"" + *v + "\"",
                   at("imds.endpoint").source);
    }
    c.imds.endpoint = *v;
    while (c.imds.endpoint.size() > 1 && c.imds.endpoint.back() == '/') c.imds.endpoint.pop_back();
  }
  if (auto v = ReadChoice("reuse", at("reuse"), kReuse, problems)) c.reuse = *v;
  config_detail::ReadPolicyKeys(values, c, problems);
  if (auto v = ReadChoice("on_rebalance", at("on_rebalance"), kOnRebalance, problems))
    c.on_rebalance = *v;
  if (auto v = ReadChoice("group.from_single", at("group.from_single"), kFromSingle, problems))
    c.group.from_single = *v;
  if (auto v = ReadChoice("on_complete", at("on_complete"), kOnComplete, problems))
    c.on_complete = *v;
  if (auto v = ReadParsed("log_level", at("log_level"), ParseLogLevel, problems)) c.log_level = *v;
  if (auto v = ReadParsed("log_format", at("log_format"), ParseLogFormat, problems)) {
    c.log_format = *v;
  }

  // What the subcommand needs, and the job name's shape.
  static const std::regex kJobName(R"([A-Za-z0-9][A-Za-z0-9._-]{0,127})");
  if (c.job.empty()) {
    if (needs.job) {
      problems.Add("job", "is required; set \"job\" in the config file, SPOTGUARD_JOB or --job");
    }
  } else if (missing_index) {
    // Said above.
  } else if (!std::regex_match(c.job, kJobName)) {
    problems.Add("job",
                 "\"" + c.job +
                     "\" must be 1-128 letters, digits, '.', '_' or '-', starting with "
                     "a letter or digit",
                 at("job").source);
  }
  if (needs.checkpoint_dir && c.checkpoint_dir.empty()) {
    problems.Add("checkpoint_dir",
                 "is required; set \"checkpoint_dir\" in the config file, "
                 "SPOTGUARD_CHECKPOINT_DIR or --checkpoint-dir");
  }
  if (!c.log_dir.empty() && !c.checkpoint_dir.empty() &&
      (c.log_dir == c.checkpoint_dir || c.log_dir.starts_with(c.checkpoint_dir + "/"))) {
    // Every log line would be an inotify event of the watcher, and the
    // logs could end up in snapshots.
    problems.Add("log_dir", "must not be inside checkpoint_dir (" + c.checkpoint_dir + ")",
                 at("log_dir").source);
  }
  if (needs.command && c.command.empty()) {
    problems.Add("command",
                 "is required; set \"command\" in the config file or give it after --, as in "
                 "spotguard run -- python3 train.py");
  }

  ConfigResult result;
  result.problems = std::move(problems.list());
  if (result.ok()) result.config = std::move(c);
  return result;
}

}  // namespace sg
