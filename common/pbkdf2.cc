// PBKDF2 with HMAC-SHA-256 (RFC 8018 §5.2), computed with the two HMAC
// states (key XOR ipad, key XOR opad) hashed once and copied for every
// iteration. OpenSSL 3's PKCS5_PBKDF2_HMAC allocates contexts on every
// iteration; at 100k iterations under AddressSanitizer that was seconds of
// the group tests' time. The low-level SHA-256 calls are deprecated in
// OpenSSL 3 but kept, and are the only way to copy a digest's state without
// an allocation. Checked against RFC 7914 §11's vectors and against
// PKCS5_PBKDF2_HMAC (tests/unit/group_records_test.cc).
#include <openssl/sha.h>

#include <array>
#include <cstring>
#include <stdexcept>

#include "common/crypto.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace sg {
namespace {

constexpr size_t kBlock = 64;  // SHA-256's block size
using Hash = std::array<unsigned char, SHA256_DIGEST_LENGTH>;

// HMAC-SHA-256 from the key's two precomputed states.
struct HmacStates {
  SHA256_CTX inner;
  SHA256_CTX outer;

  explicit HmacStates(std::string_view key) {
    std::array<unsigned char, kBlock> k{};
    if (key.size() > kBlock) {
      SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), k.data());
    } else {
      std::memcpy(k.data(), key.data(), key.size());
    }
    std::array<unsigned char, kBlock> pad{};
    for (size_t i = 0; i < kBlock; ++i) pad[i] = k[i] ^ 0x36;
    SHA256_Init(&inner);
    SHA256_Update(&inner, pad.data(), pad.size());
    for (size_t i = 0; i < kBlock; ++i) pad[i] = k[i] ^ 0x5c;
    SHA256_Init(&outer);
    SHA256_Update(&outer, pad.data(), pad.size());
  }

  // HMAC(key, a || b).
  Hash Mac(const unsigned char* a, size_t a_len, const unsigned char* b, size_t b_len) const {
    Hash inner_hash, out;
    SHA256_CTX c = inner;
    SHA256_Update(&c, a, a_len);
    if (b_len > 0) SHA256_Update(&c, b, b_len);
    SHA256_Final(inner_hash.data(), &c);
    c = outer;
    SHA256_Update(&c, inner_hash.data(), inner_hash.size());
    SHA256_Final(out.data(), &c);
    return out;
  }
};

}  // namespace

std::string Pbkdf2Sha256(std::string_view password, std::string_view salt, int iterations,
                         size_t length) {
  if (iterations < 1 || length == 0) throw std::invalid_argument("PBKDF2: no iterations or length");
  const HmacStates hmac(password);
  std::string out;
  out.reserve(length);
  for (uint32_t block = 1; out.size() < length; ++block) {
    const unsigned char index[4] = {static_cast<unsigned char>(block >> 24),
                                    static_cast<unsigned char>(block >> 16),
                                    static_cast<unsigned char>(block >> 8),
                                    static_cast<unsigned char>(block)};
    Hash u = hmac.Mac(reinterpret_cast<const unsigned char*>(salt.data()), salt.size(), index,
                      sizeof index);
    Hash t = u;
    for (int i = 1; i < iterations; ++i) {
      u = hmac.Mac(u.data(), u.size(), nullptr, 0);
      for (size_t j = 0; j < t.size(); ++j) t[j] ^= u[j];
    }
    out.append(reinterpret_cast<const char*>(t.data()), std::min(t.size(), length - out.size()));
  }
  return out;
}

}  // namespace sg

#pragma GCC diagnostic pop
