// The typed readers of config values: each returns the value as C++ or adds a
// problem naming the key, what was wrong and where the value came from; and
// how a configured path is made absolute.
#include "agent/config/config_values.h"

#include <filesystem>

namespace sg::config_detail {

std::string Describe(const json& v) {
  if (v.is_string()) return "\"" + v.get<std::string>() + "\"";
  return v.dump();
}

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
  if (*d > kMaxConfigDuration) {
    // Longer ones overflow once turned into nanoseconds or doubled by a backoff.
    p.Add(key,
          Describe(v.value) + " is too long: at most " + FormatDuration(kMaxConfigDuration) +
              " (30 days)",
          v.source);
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

std::string AbsolutePath(const std::string& path, bool trim_slash) {
  std::error_code ec;
  std::string out = std::filesystem::absolute(path, ec).lexically_normal().string();
  while (trim_slash && out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace sg::config_detail
