#include "agent/config/engine_identity.h"

#include <charconv>

namespace sg {
namespace {

// A decimal of at most 18 digits, no sign, no spaces: what the engines set.
std::optional<int64_t> ParseWhole(const std::string& text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

std::string Get(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

}  // namespace

EngineIdentityResult ReadEngineIdentity(const std::map<std::string, std::string>& env) {
  EngineIdentityResult r;
  for (const char* var : {kArrayIndexVar, kCompletionIndexVar}) {
    const std::string text = Get(env, var);
    if (text.empty()) continue;
    std::optional<int64_t> v = ParseWhole(text);
    if (!v) {
      r.problems.push_back(std::string(var) + " must be a whole number >= 0, got \"" + text + "\"");
    } else {
      r.identity.index = v;
      r.identity.index_var = var;
    }
    break;  // the first one set decides
  }
  if (const std::string text = Get(env, kAttemptVar); !text.empty()) {
    std::optional<int64_t> v = ParseWhole(text);
    if (!v || *v < 1) {
      r.problems.push_back(std::string(kAttemptVar) + " must be a whole number >= 1, got \"" +
                           text + "\"");
    } else {
      r.identity.attempt = v;
    }
  }
  return r;
}

std::string NoIndexMessage() {
  return std::string("uses {index}, but neither ") + kArrayIndexVar + " nor " +
         kCompletionIndexVar +
         " is set (an AWS Batch array job or a Kubernetes Indexed Job sets one; set one by hand "
         "to run a single child)";
}

}  // namespace sg
