// ConfigToJson: the effective config as a config file would hold it, each key
// written by its row of the config table (agent/config/config_keys.h, docs/design.md
// §3), with what looks like a secret (credentials in URLs, secret-named
// arguments) redacted on request.
#include <regex>

#include "agent/config/config.h"
#include "agent/config/config_keys.h"
#include "agent/config/config_rows.h"

namespace sg {
namespace config_detail {

// user:password@ in a URL replaced by "<redacted>".
std::string RedactUrl(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const size_t host_start = scheme + 3;
  const size_t at = url.find('@', host_start);
  const size_t slash = url.find('/', host_start);
  if (at == std::string::npos || (slash != std::string::npos && at > slash)) return url;
  return url.substr(0, host_start) + "<redacted>" + url.substr(at);
}

}  // namespace config_detail

namespace {

using ojson = nlohmann::ordered_json;

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
      out.push_back(config_detail::RedactUrl(a));
    }
  }
  return out;
}

ojson ConfigToJson(const Config& c, bool redact) {
  // Each row writes its key; a dotted one goes into its section's object,
  // which is made where the section's first key is (table order).
  ojson j = ojson::object();
  for (const config_detail::KeyRow& row : config_detail::Rows()) {
    const std::string key = row.key;
    ojson value = row.write(row, c, redact);
    if (const size_t dot = key.find('.'); dot != std::string::npos) {
      j[key.substr(0, dot)][key.substr(dot + 1)] = std::move(value);
    } else {
      j[key] = std::move(value);
    }
  }
  return j;
}

}  // namespace sg
