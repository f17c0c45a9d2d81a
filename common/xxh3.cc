#include "common/xxh3.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace sg {
namespace {

std::string CanonicalHex(XXH128_hash_t hash) {
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, hash);
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * sizeof(canonical.digest));
  for (unsigned char byte : canonical.digest) {
    hex.push_back(kDigits[byte >> 4]);
    hex.push_back(kDigits[byte & 15]);
  }
  return hex;
}

}  // namespace

struct Xxh3Stream::State {
  XXH3_state_t xxh;
};

std::string Xxh3Hex(std::string_view data) {
  return CanonicalHex(XXH3_128bits(data.data(), data.size()));
}

Xxh3Stream::Xxh3Stream() : state_(std::make_unique<State>()) {
  XXH3_128bits_reset(&state_->xxh);
}

Xxh3Stream::~Xxh3Stream() = default;

void Xxh3Stream::Update(std::string_view data) {
  XXH3_128bits_update(&state_->xxh, data.data(), data.size());
}

std::string Xxh3Stream::FinishHex() const { return CanonicalHex(XXH3_128bits_digest(&state_->xxh)); }

bool IsHexXxh3(std::string_view hex) {
  return hex.size() == 32 && hex.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

}  // namespace sg
