#include "agent/config.h"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <regex>

#include "common/files.h"
#include "common/signal_names.h"
#include "common/store_url.h"
#include "common/strings.h"

namespace sg {
namespace {

using json = nlohmann::ordered_json;

enum class Kind {
  kString,
  kNullableString,
  kDuration,
  kNullableDuration,
  kInt,
  kStringList,
  kNullableStringList,
  kShuffle,  // "auto" | "off" | 2 | 4
};

struct KeySpec {
  const char* key;
  Kind kind;
  const char* default_json;  // the default, as JSON text
};

// Every config key with its default. Nested keys are dotted.
const KeySpec kKeys[] = {
    {"job", Kind::kString, R"("")"},
    {"store", Kind::kString, R"("file:///var/lib/spotguard/store")"},
    {"region", Kind::kNullableString, "null"},
    {"endpoint", Kind::kNullableString, "null"},
    {"checkpoint_dir", Kind::kString, R"("")"},
    {"preset", Kind::kString, R"("generic")"},
    {"patterns", Kind::kNullableStringList, "null"},
    {"command", Kind::kStringList, "[]"},
    {"resume_args", Kind::kStringList, "[]"},
    {"checkpoint_signal", Kind::kNullableString, "null"},
    {"stop_signal", Kind::kString, R"("SIGTERM")"},
    {"stop_grace", Kind::kDuration, R"("60s")"},
    {"upload_interval", Kind::kDuration, R"("5m")"},
    {"settle_time", Kind::kNullableDuration, "null"},
    {"checkpoint_interval", Kind::kNullableDuration, "null"},
    {"keep", Kind::kInt, "3"},
    {"compression.level", Kind::kInt, "1"},  // chosen by measurement: bench/RESULTS.md
    {"compression.threads", Kind::kInt, "0"},
    {"compression.shuffle", Kind::kShuffle, R"("auto")"},
    {"imds.endpoint", Kind::kString, R"("http://169.254.169.254")"},
    {"imds.poll_interval", Kind::kDuration, R"("2s")"},
    {"on_rebalance", Kind::kString, R"("snapshot")"},
    {"on_complete", Kind::kString, R"("mark")"},
    {"lifecycle_hook", Kind::kNullableString, "null"},
    {"restart.max", Kind::kInt, "5"},
    {"restart.backoff", Kind::kDuration, R"("10s")"},
    {"restart.max_backoff", Kind::kDuration, R"("5m")"},
    {"lease.heartbeat", Kind::kDuration, R"("30s")"},
    {"lease.timeout", Kind::kDuration, R"("150s")"},
    {"log_level", Kind::kString, R"("info")"},
    {"log_format", Kind::kString, R"("text")"},
};

constexpr const char* kSections[] = {"compression", "imds", "restart", "lease"};

const std::pair<std::string_view, Preset> kPresets[] = {
    {"caffe", Preset::kCaffe},           {"pytorch", Preset::kPytorch},
    {"lightning", Preset::kLightning},   {"huggingface", Preset::kHuggingface},
    {"tensorflow", Preset::kTensorflow}, {"dcp", Preset::kDcp},
    {"generic", Preset::kGeneric}};

const std::pair<std::string_view, OnRebalance> kOnRebalance[] = {
    {"snapshot", OnRebalance::kSnapshot}, {"ignore", OnRebalance::kIgnore}};
const std::pair<std::string_view, OnComplete> kOnComplete[] = {
    {"mark", OnComplete::kMark},
    {"scale-to-zero", OnComplete::kScaleToZero},
    {"shutdown", OnComplete::kShutdown}};
const std::pair<std::string_view, Shuffle> kShuffleNames[] = {
    {"auto", Shuffle::kAuto}, {"off", Shuffle::kOff}, {"2", Shuffle::kTwo}, {"4", Shuffle::kFour}};

const std::vector<std::string> kPlaceholders = {"resume", "checkpoint_dir", "job", "attempt"};

const KeySpec* FindSpec(std::string_view key) {
  for (const KeySpec& s : kKeys) {
    if (key == s.key) return &s;
  }
  return nullptr;
}

bool IsSection(std::string_view key) {
  return std::any_of(std::begin(kSections), std::end(kSections),
                     [&](const char* s) { return key == s; });
}

// A value with the place it came from, for messages.
struct Sourced {
  json value;
  std::string source;  // "default", "/etc/spotguard/x.json", "SPOTGUARD_KEEP", "--job"
};

class Problems {
 public:
  void Add(const std::string& key, const std::string& what, const std::string& source = "") {
    std::string msg = key + ": " + what;
    if (!source.empty() && source != "default") msg += " (from " + source + ")";
    list_.push_back({key, std::move(msg)});
  }
  std::vector<ConfigProblem>& list() { return list_; }

 private:
  std::vector<ConfigProblem> list_;
};

std::string Describe(const json& v) {
  if (v.is_string()) return "\"" + v.get<std::string>() + "\"";
  return v.dump();
}

void LoadFile(const std::string& path, std::map<std::string, Sourced>& values, Problems& problems) {
  auto text = ReadFileToString(path);
  if (!text.ok()) {
    problems.Add("config", "cannot read " + path + ": " + text.status().message());
    return;
  }
  json doc;
  try {
    doc = json::parse(*text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at line..."
    if (size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    problems.Add("config", path + " is not valid JSON: " + what);
    return;
  } catch (const json::exception& e) {
    // out_of_range.406: a number too big for a double, such as 1e400.
    std::string what = e.what();
    if (size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    problems.Add("config", path + " is not usable JSON: " + what);
    return;
  }
  if (!doc.is_object()) {
    problems.Add("config", path + " must hold a JSON object, not " + std::string(doc.type_name()));
    return;
  }
  std::vector<std::string> known = ConfigKeys();
  for (const char* s : kSections) known.emplace_back(s);
  auto unknown = [&](const std::string& key) {
    std::string msg = "unknown key in " + path;
    if (std::string guess = ClosestMatch(key, known); !guess.empty()) {
      msg += "; did you mean \"" + guess + "\"?";
    }
    problems.Add(key, msg);
  };
  for (const auto& [key, value] : doc.items()) {
    if (IsSection(key)) {
      if (!value.is_object()) {
        problems.Add(key, "must be an object, got " + Describe(value), path);
        continue;
      }
      for (const auto& [sub, subvalue] : value.items()) {
        const std::string dotted = key + "." + sub;
        if (FindSpec(dotted)) {
          values[dotted] = {subvalue, path};
        } else {
          unknown(dotted);
        }
      }
    } else if (FindSpec(key)) {
      values[key] = {value, path};
    } else {
      unknown(key);
    }
  }
}

// A value given as text (environment, flag) turned into the JSON the file
// would hold. Returns false with a problem added when it cannot be.
bool FromText(const KeySpec& spec, const std::string& text, const std::string& source, json* out,
              Problems& problems) {
  const bool nullable = spec.kind == Kind::kNullableString ||
                        spec.kind == Kind::kNullableDuration ||
                        spec.kind == Kind::kNullableStringList;
  if (nullable && (text.empty() || text == "null")) {
    *out = nullptr;
    return true;
  }
  switch (spec.kind) {
    case Kind::kInt: {
      try {
        size_t used = 0;
        long long n = std::stoll(text, &used);
        if (used == text.size()) {
          *out = n;
          return true;
        }
      } catch (const std::exception&) {
      }
      *out = text;  // reported as "must be an integer" with the value
      return true;
    }
    case Kind::kStringList:
    case Kind::kNullableStringList:
      if (!text.empty() && text.front() == '[') {
        try {
          *out = json::parse(text);
          return true;
        } catch (const json::exception&) {  // parse_error, or out_of_range for 1e400
          problems.Add(spec.key, "is not a valid JSON array: " + text, source);
          return false;
        }
      }
      if (std::string_view(spec.key) == "patterns") {
        json list = json::array();
        for (const std::string& p : Split(text, ',')) list.push_back(std::string(Trim(p)));
        *out = std::move(list);
        return true;
      }
      problems.Add(spec.key, "must be a JSON array of strings, e.g. [\"python3\", \"train.py\"]",
                   source);
      return false;
    default:
      *out = text;
      return true;
  }
}

// Typed readers. Each adds a problem and returns nullopt when the value is of
// the wrong type.
std::optional<std::string> ReadString(const std::string& key, const Sourced& v, Problems& p) {
  if (v.value.is_string()) return v.value.get<std::string>();
  p.Add(key, "must be a string, got " + Describe(v.value), v.source);
  return std::nullopt;
}

std::optional<long long> ReadInt(const std::string& key, const Sourced& v, Problems& p) {
  if (v.value.is_number_integer()) return v.value.get<long long>();
  p.Add(key, "must be an integer, got " + Describe(v.value), v.source);
  return std::nullopt;
}

std::optional<Duration> ReadDuration(const std::string& key, const Sourced& v, Problems& p) {
  if (!v.value.is_string()) {
    p.Add(key, "must be a duration string like \"90s\", \"5m\" or \"1h\", got " + Describe(v.value),
          v.source);
    return std::nullopt;
  }
  auto d = ParseDuration(v.value.get<std::string>());
  if (!d.ok()) {
    p.Add(key, d.status().message(), v.source);
    return std::nullopt;
  }
  return *d;
}

std::optional<std::vector<std::string>> ReadStringList(const std::string& key, const Sourced& v,
                                                       Problems& p) {
  if (v.value.is_array()) {
    std::vector<std::string> out;
    bool good = true;
    for (const auto& item : v.value) {
      if (item.is_string()) {
        out.push_back(item.get<std::string>());
      } else {
        good = false;
      }
    }
    if (good) return out;
  }
  p.Add(key, "must be a list of strings, got " + Describe(v.value), v.source);
  return std::nullopt;
}

template <typename E, size_t N>
std::optional<E> ReadChoice(const std::string& key, const Sourced& v,
                            const std::pair<std::string_view, E> (&choices)[N], Problems& p) {
  auto s = ReadString(key, v, p);
  if (!s) return std::nullopt;
  std::vector<std::string> names;
  for (const auto& [name, value] : choices) {
    if (name == ToLower(*s)) return value;
    names.emplace_back(name);
  }
  std::string msg = "unknown value \"" + *s + "\" (choose one of " + Join(names, ", ") + ")";
  if (std::string guess = ClosestMatch(*s, names); !guess.empty()) {
    msg += "; did you mean \"" + guess + "\"?";
  }
  p.Add(key, msg, v.source);
  return std::nullopt;
}

template <typename T>
std::optional<T> ReadParsed(const std::string& key, const Sourced& v,
                            StatusOr<T> (*parse)(std::string_view), Problems& p) {
  auto s = ReadString(key, v, p);
  if (!s) return std::nullopt;
  auto parsed = parse(*s);
  if (parsed.ok()) return *parsed;
  p.Add(key, parsed.status().message(), v.source);
  return std::nullopt;
}

void CheckPlaceholders(const std::string& key, const std::vector<std::string>& args,
                       const std::string& source, Problems& p) {
  static const std::regex kPlaceholder(R"(\{([a-z_]+)\})");
  for (size_t i = 0; i < args.size(); ++i) {
    for (std::sregex_iterator it(args[i].begin(), args[i].end(), kPlaceholder), end; it != end;
         ++it) {
      const std::string name = (*it)[1];
      if (std::find(kPlaceholders.begin(), kPlaceholders.end(), name) == kPlaceholders.end()) {
        p.Add(key + "[" + std::to_string(i) + "]",
              "unknown placeholder {" + name +
                  "} (known: {resume}, {checkpoint_dir}, {job}, "
                  "{attempt})",
              source);
      }
    }
  }
}

bool IsHttpUrl(const std::string& s) {
  return (s.starts_with("http://") && s.size() > 7) || (s.starts_with("https://") && s.size() > 8);
}

std::vector<std::string> DefaultPatterns(Preset preset) {
  switch (preset) {
    case Preset::kCaffe:
      return {"*.caffemodel", "*.solverstate", "*.caffemodel.h5", "*.solverstate.h5"};
    case Preset::kPytorch:
      return {"*.pt", "*.pth", "*.bin", "*.safetensors"};
    case Preset::kLightning:
      return {"*.ckpt"};
    case Preset::kHuggingface:
      return {"checkpoint-*"};
    case Preset::kTensorflow:
      return {"checkpoint", "*.index", "*.data-*"};
    case Preset::kDcp:
      return {"*"};
    case Preset::kGeneric:
      return {"*"};
  }
  return {"*"};
}

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

}  // namespace

std::vector<std::string> ConfigKeys() {
  std::vector<std::string> out;
  for (const KeySpec& s : kKeys) out.emplace_back(s.key);
  return out;
}

std::string EnvVarForKey(const std::string& key) {
  std::string name = "SPOTGUARD_" + ToUpper(key);
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

std::string_view PresetName(Preset p) {
  for (const auto& [name, value] : kPresets) {
    if (value == p) return name;
  }
  return "generic";
}

ConfigResult LoadConfig(const ConfigSources& sources, const ConfigNeeds& needs) {
  Problems problems;
  std::map<std::string, Sourced> values;
  for (const KeySpec& s : kKeys) values[s.key] = {json::parse(s.default_json), "default"};

  if (sources.file) LoadFile(*sources.file, values, problems);
  for (const KeySpec& s : kKeys) {
    const std::string env_name = EnvVarForKey(s.key);
    if (auto it = sources.env.find(env_name); it != sources.env.end()) {
      json v;
      if (FromText(s, it->second, env_name, &v, problems)) values[s.key] = {v, env_name};
    }
  }
  for (const auto& [key, text] : sources.flags) {
    const KeySpec* s = FindSpec(key);
    if (s == nullptr) continue;  // the CLI only passes known keys
    std::string flag = "--" + key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    std::replace(flag.begin(), flag.end(), '.', '-');
    json v;
    if (FromText(*s, text, flag, &v, problems)) values[key] = {v, flag};
  }
  if (!sources.command_args.empty()) {
    values["command"] = {json(sources.command_args), "the arguments after --"};
  }

  Config c;
  auto at = [&](const char* key) -> const Sourced& { return values.at(key); };
  auto nullable = [&](const char* key) { return at(key).value.is_null(); };

  if (auto v = ReadString("job", at("job"), problems)) c.job = *v;
  if (auto v = ReadString("store", at("store"), problems)) {
    auto url = ParseStoreUrl(*v);
    if (url.ok()) {
      c.store = url->ToString();
    } else {
      problems.Add("store", url.status().message(), at("store").source);
    }
  }
  for (const char* key : {"region", "endpoint", "lifecycle_hook"}) {
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
    CheckPlaceholders(key, *v, at(key).source, problems);
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
      {"upload_interval", &c.upload_interval, false},
      {"imds.poll_interval", &c.imds.poll_interval, false},
      {"restart.backoff", &c.restart.backoff, false},
      {"restart.max_backoff", &c.restart.max_backoff, false},
      {"lease.heartbeat", &c.lease.heartbeat, false},
      {"lease.timeout", &c.lease.timeout, false},
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
  if (auto v = ReadChoice("on_rebalance", at("on_rebalance"), kOnRebalance, problems))
    c.on_rebalance = *v;
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

json ConfigToJson(const Config& c, bool redact) {
  auto opt = [](const auto& o) -> json { return o ? json(*o) : json(nullptr); };
  auto url = [&](const std::string& u) { return redact ? RedactUrl(u) : u; };
  auto args = [&](const std::vector<std::string>& a) { return redact ? RedactArgs(a) : a; };
  auto choice = [](auto value, const auto& table) {
    for (const auto& [name, v] : table) {
      if (v == value) return std::string(name);
    }
    return std::string();
  };

  json j;
  j["job"] = c.job;
  j["store"] = url(c.store);
  j["region"] = opt(c.region);
  j["endpoint"] = c.endpoint ? json(url(*c.endpoint)) : json(nullptr);
  j["checkpoint_dir"] = c.checkpoint_dir;
  j["preset"] = PresetName(c.preset);
  j["patterns"] = c.patterns;
  j["command"] = args(c.command);
  j["resume_args"] = args(c.resume_args);
  j["checkpoint_signal"] = c.checkpoint_signal ? SignalName(*c.checkpoint_signal) : "none";
  j["stop_signal"] = SignalName(c.stop_signal);
  j["stop_grace"] = FormatDuration(c.stop_grace);
  j["upload_interval"] = FormatDuration(c.upload_interval);
  j["settle_time"] = c.settle_time ? json(FormatDuration(*c.settle_time)) : json(nullptr);
  j["checkpoint_interval"] =
      c.checkpoint_interval ? json(FormatDuration(*c.checkpoint_interval)) : json(nullptr);
  j["keep"] = c.keep;
  const std::string shuffle = choice(c.compression.shuffle, kShuffleNames);
  j["compression"] = {
      {"level", c.compression.level},
      {"threads", c.compression.threads},
      {"shuffle", shuffle == "2" || shuffle == "4" ? json(std::stoi(shuffle)) : json(shuffle)}};
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
  j["log_level"] = LogLevelName(c.log_level);
  j["log_format"] = c.log_format == LogFormat::kJson ? "json" : "text";
  return j;
}

}  // namespace sg
