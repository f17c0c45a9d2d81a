#include "common/duration.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>

namespace sg {
namespace {

struct Unit {
  std::string_view name;
  int64_t ms;
};
// Longest names first so "ms" is not read as "m" followed by junk.
constexpr Unit kUnits[] = {
    {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};

}  // namespace

StatusOr<Duration> ParseDuration(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("\"" + std::string(text) + "\" is not a duration (" +
                                   std::string(why) + "; use e.g. \"90s\", \"5m\", \"1h30m\")");
  };
  if (text.empty()) return bad("empty");
  if (text == "0") return Duration(0);
  double total_ms = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
      ++i;
    }
    if (i == start) {
      return bad(text[i] == '-' ? "negative" : "expected a number");
    }
    std::string number(text.substr(start, i - start));
    if (number.find('.') != number.rfind('.') || number.front() == '.' || number.back() == '.') {
      return bad("malformed number \"" + number + "\"");
    }
    size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::string_view unit_name = text.substr(unit_start, i - unit_start);
    if (unit_name.empty()) return bad("missing unit after \"" + number + "\"");
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (u.name == unit_name) unit = &u;
    }
    if (unit == nullptr) return bad("unknown unit \"" + std::string(unit_name) + "\"");
    total_ms += std::stod(number) * static_cast<double>(unit->ms);
    if (total_ms > static_cast<double>(std::numeric_limits<int64_t>::max() / 2)) {
      return bad("too long");
    }
  }
  return Duration(static_cast<int64_t>(std::llround(total_ms)));
}

std::string FormatDuration(Duration d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  // Sub-second precision: milliseconds are the only exact form.
  if (ms % 1000 != 0) {
    out.append(std::to_string(ms));
    out.append("ms");
    return out;
  }
  int64_t s = ms / 1000;
  const int64_t h = s / 3600;
  const int64_t m = (s % 3600) / 60;
  s %= 60;
  if (h) out += std::to_string(h) + "h";
  if (m) out += std::to_string(m) + "m";
  if (s) out += std::to_string(s) + "s";
  return out;
}

}  // namespace sg
