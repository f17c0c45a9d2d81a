// Hashes and MACs (OpenSSL, wrapped only here).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace sg {

// Frees what OpenSSL keeps for the calling thread (its error queue, caches).
// A detached thread calls it before it hands over its result: the process
// may end right after that, before the thread's own exit would free them.
void ReleaseThreadCryptoState();

std::string HexEncode(std::string_view bytes);
std::string Base64Encode(std::string_view bytes);

std::string Sha256(std::string_view data);  // 32 raw bytes
std::string Sha256Hex(std::string_view data);
std::string HmacSha256(std::string_view key, std::string_view data);  // 32 raw bytes
std::string Md5(std::string_view data);                               // 16 raw bytes
// PBKDF2 with HMAC-SHA-256 (RFC 8018), `length` raw bytes: a digest of a
// secret that is slow to search by guessing.
std::string Pbkdf2Sha256(std::string_view password, std::string_view salt, int iterations,
                         size_t length = 32);

// Incremental SHA-256, for hashing bytes while they stream past.
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;
  void Update(std::string_view data);
  std::string FinishHex();  // the stream cannot be updated afterwards

 private:
  void* ctx_;  // EVP_MD_CTX
};

}  // namespace sg
