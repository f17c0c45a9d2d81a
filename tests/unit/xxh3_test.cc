// XXH3-128 (common/xxh3.h): the canonical hex form that `xxh128sum` prints,
// one-shot and streamed alike.
#include "common/xxh3.h"

#include <gtest/gtest.h>

#include "tests/support/random_bytes.h"

namespace sg {
namespace {

// Known answers, as printed by `xxh128sum` (Debian's xxhash 0.8.1) for the
// same bytes: `printf '' | xxh128sum`, `printf abc | xxh128sum`.
TEST(Xxh3, KnownAnswersInTheCanonicalForm) {
  EXPECT_EQ(Xxh3Hex(""), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(Xxh3Hex("abc"), "06b05ab6733a618578af5f94892f3950");
  EXPECT_TRUE(IsHexXxh3(Xxh3Hex("abc")));
}

// Streamed in pieces of any size, the digest is the one-shot digest: restore
// hashes a frame a piece at a time.
TEST(Xxh3, StreamedInPiecesEqualsOneShot) {
  const std::string data = testing::RandomBytes(1 << 20, 3);
  for (size_t piece : {1u, 7u, 240u, 4096u, 128u << 10, 1u << 20}) {
    Xxh3Stream stream;
    for (size_t at = 0; at < data.size(); at += piece) stream.Update(std::string_view(data).substr(at, piece));
    EXPECT_EQ(stream.FinishHex(), Xxh3Hex(data)) << "pieces of " << piece;
  }
  Xxh3Stream empty;
  EXPECT_EQ(empty.FinishHex(), Xxh3Hex(""));
  EXPECT_NE(Xxh3Hex(data), Xxh3Hex(data.substr(1)));
}

TEST(Xxh3, IsHexXxh3AcceptsOnlyTheCanonicalForm) {
  EXPECT_FALSE(IsHexXxh3(""));
  EXPECT_FALSE(IsHexXxh3(std::string(31, 'a')));
  EXPECT_FALSE(IsHexXxh3(std::string(33, 'a')));
  EXPECT_FALSE(IsHexXxh3(std::string(32, 'A')));
  EXPECT_FALSE(IsHexXxh3(std::string(31, 'a') + "g"));
  EXPECT_TRUE(IsHexXxh3(std::string(32, 'f')));
}

}  // namespace
}  // namespace sg
