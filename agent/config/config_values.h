// Config values with the place each came from, the list of problems found in
// them, and the typed readers that turn a value into a C++ one or add a
// problem naming the key, the value and its source. Internal to
// agent/config*.cc.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/config/config.h"
#include "common/duration.h"
#include "common/status.h"
#include "common/strings.h"

namespace sg::config_detail {

using json = nlohmann::ordered_json;

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

// A value as a message quotes it: strings in quotes, the rest as JSON.
std::string Describe(const json& v);

// Every key's value, by dotted key.
using SourcedValues = std::map<std::string, Sourced>;

// Typed readers. Each adds a problem and returns nullopt when the value is of
// the wrong type.
std::optional<std::string> ReadString(const std::string& key, const Sourced& v, Problems& p);
std::optional<long long> ReadInt(const std::string& key, const Sourced& v, Problems& p);
// The longest duration any key takes ("30d"): nothing the agent waits for is
// longer, and anything up to it stays far from overflowing in nanoseconds.
inline constexpr Duration kMaxConfigDuration = std::chrono::hours(24 * 30);

// A duration string of at most kMaxConfigDuration.
std::optional<Duration> ReadDuration(const std::string& key, const Sourced& v, Problems& p);
std::optional<std::vector<std::string>> ReadStringList(const std::string& key, const Sourced& v,
                                                       Problems& p);
// `path` made absolute and normal, without its trailing '/' when `trim_slash`.
std::string AbsolutePath(const std::string& path, bool trim_slash);

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

}  // namespace sg::config_detail
