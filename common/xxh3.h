// XXH3-128, the non-cryptographic hash that restore checks each frame's
// decoded bytes against (docs/format.md, "Frame digests"): about ten times
// the speed of SHA-256 on one core. The hex form is the canonical
// (big-endian) one that `xxh128sum` prints. xxHash is compiled into this
// file alone, from its header (no library is linked).
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace sg {

std::string Xxh3Hex(std::string_view data);  // 32 hex digits

// Incremental XXH3-128, for hashing bytes a piece at a time.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void Update(std::string_view data);
  std::string FinishHex() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Whether `hex` has the form Xxh3Hex gives: 32 lowercase hex digits.
bool IsHexXxh3(std::string_view hex);

}  // namespace sg
