// Deterministic pseudo-random bytes for tests.
#pragma once

#include <cstring>
#include <random>
#include <string>

namespace sg::testing {

inline std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// Float32 weights, as a trained layer holds them: small values around zero
// (the codec picks a shuffle for them).
inline std::string Float32Weights(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::string s(count * 4, '\0');
  for (size_t i = 0; i < count; ++i) {
    const float v = dist(rng);
    std::memcpy(&s[i * 4], &v, 4);
  }
  return s;
}

}  // namespace sg::testing
