// Large files for round-trip tests, written and hashed in 1 MiB blocks so a
// 1 GiB test never holds the file in memory.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "common/crypto.h"

namespace sg::testing {

struct FileDigest {
  uint64_t size = 0;
  std::string sha256;
  bool operator==(const FileDigest&) const = default;
};

// Writes `blocks` MiB of float32 "weights" (a trained-looking 1 MiB block,
// varied per block so no two frames are equal) and returns its digest.
inline FileDigest WriteWeightsFile(const std::string& path, size_t blocks) {
  constexpr size_t kBlock = 1 << 20;
  std::string block(kBlock, '\0');
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  for (size_t i = 0; i < kBlock; i += 4) {
    const float v = dist(rng);
    std::memcpy(&block[i], &v, 4);
  }
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  Sha256Stream sha;
  for (size_t b = 0; b < blocks; ++b) {
    std::memcpy(&block[(b * 4096) % kBlock], &b, sizeof b);
    out.write(block.data(), static_cast<std::streamsize>(block.size()));
    sha.Update(block);
  }
  return {blocks * kBlock, sha.FinishHex()};
}

inline FileDigest DigestOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string buf(1 << 20, '\0');
  Sha256Stream sha;
  FileDigest d;
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
    sha.Update(std::string_view(buf.data(), static_cast<size_t>(in.gcount())));
    d.size += static_cast<uint64_t>(in.gcount());
  }
  d.sha256 = sha.FinishHex();
  return d;
}

}  // namespace sg::testing
