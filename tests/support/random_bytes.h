// Deterministic pseudo-random bytes for tests.
#pragma once

#include <random>
#include <string>

namespace sg::testing {

inline std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

}  // namespace sg::testing
