#include "agent/repo/store_names.h"

#include <cstdio>

namespace sg {

std::string SeqName(uint64_t seq) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%010llu", static_cast<unsigned long long>(seq));
  return buf;
}

std::optional<uint64_t> ParseSeqName(std::string_view name) {
  if (name.size() != 10) return std::nullopt;
  uint64_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

std::string CompactStamp(std::string_view time_utc) {
  std::string out;
  for (char c : time_utc) {
    if (c != '-' && c != ':') out += c;
  }
  return out;
}

}  // namespace sg
