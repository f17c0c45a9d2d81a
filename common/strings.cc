#include "common/strings.h"

#include <algorithm>
#include <cctype>

namespace sg {

std::string EnvOr(const std::map<std::string, std::string>& env, const std::string& name,
                  const std::string& fallback) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? fallback : it->second;
}

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string ToUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  const auto not_space = [](char c) { return !std::isspace(static_cast<unsigned char>(c)); };
  auto b = std::find_if(s.begin(), s.end(), not_space);
  auto e = std::find_if(s.rbegin(), s.rend(), not_space).base();
  return b < e ? std::string_view(&*b, static_cast<size_t>(e - b)) : std::string_view();
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates) {
  const size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3);
  std::string best;
  size_t best_distance = limit + 1;
  const std::string lowered = ToLower(word);
  for (const std::string& c : candidates) {
    // Lengths further apart than the limit cannot match; skipping them keeps
    // a megabyte-long unknown key from costing seconds of edit distance.
    if (c.size() > word.size() + limit || word.size() > c.size() + limit) continue;
    const size_t d = EditDistance(lowered, ToLower(c));
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

}  // namespace sg
