// Pbkdf2Sha256 (common/pbkdf2.cc): RFC 7914 §11's PBKDF2-HMAC-SHA256
// vectors, and the same bytes as OpenSSL's PKCS5_PBKDF2_HMAC for the edges
// of the construction (a password longer than a SHA-256 block, an empty
// salt, lengths across block boundaries, one and many iterations).
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <stdexcept>
#include <string>

#include "common/crypto.h"

namespace sg {
namespace {

std::string Reference(const std::string& password, const std::string& salt, int iterations,
                      size_t length) {
  std::string out(length, '\0');
  EXPECT_EQ(PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                              reinterpret_cast<const unsigned char*>(salt.data()),
                              static_cast<int>(salt.size()), iterations, EVP_sha256(),
                              static_cast<int>(length),
                              reinterpret_cast<unsigned char*>(out.data())),
            1);
  return out;
}

TEST(Pbkdf2, MatchesThePublishedVectors) {
  EXPECT_EQ(HexEncode(Pbkdf2Sha256("passwd", "salt", 1, 64)),
            "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc"
            "49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783");
  EXPECT_EQ(HexEncode(Pbkdf2Sha256("Password", "NaCl", 80000, 64)),
            "4ddcd8f60b98be21830cee5ef22701f9641a4418d04c0414aeff08876b34ab56"
            "a1d425a1225833549adb841b51c9b3176a272bdebba1d078478f62b397f33c8d");
}

TEST(Pbkdf2, MatchesOpenSslAtTheEdgesOfTheConstruction) {
  const std::string long_password(200, 'p');  // hashed first: longer than a block
  const std::string block_password(64, 'q');  // exactly a block: used as it is
  for (const std::string& password : {std::string(), std::string("pw"), block_password,
                                      long_password}) {
    for (const std::string& salt : {std::string(), std::string("spotguard settings job")}) {
      for (int iterations : {1, 2, 1000}) {
        for (size_t length : {1u, 31u, 32u, 33u, 64u, 65u}) {
          EXPECT_EQ(Pbkdf2Sha256(password, salt, iterations, length),
                    Reference(password, salt, iterations, length))
              << password.size() << "-byte password, " << salt.size() << "-byte salt, "
              << iterations << " iterations, " << length << " bytes";
        }
      }
    }
  }
}

TEST(Pbkdf2, RefusesNoIterationsAndNoLength) {
  EXPECT_THROW(Pbkdf2Sha256("pw", "salt", 0, 32), std::invalid_argument);
  EXPECT_THROW(Pbkdf2Sha256("pw", "salt", 1, 0), std::invalid_argument);
}

}  // namespace
}  // namespace sg
