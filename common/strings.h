// Small string helpers shared by the config, the CLI and the stores.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sg {

// The value of `name` in an environment map; `fallback` when it is unset or
// empty.
std::string EnvOr(const std::map<std::string, std::string>& env, const std::string& name,
                  const std::string& fallback = "");

std::string ToLower(std::string_view s);
std::string ToUpper(std::string_view s);
std::string_view Trim(std::string_view s);
std::vector<std::string> Split(std::string_view s, char sep);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);

// Levenshtein distance, for did-you-mean suggestions.
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word`, or "" when none is close enough to be a
// plausible typo (distance at most a third of the word's length, minimum 1,
// maximum 3).
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace sg
