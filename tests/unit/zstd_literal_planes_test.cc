// The planes of a shuffled frame coded as literals only where a probe finds
// that as small (common/zstd_literal_planes.h): still one plain zstd frame.
#include "common/zstd_literal_planes.h"

#define ZSTD_STATIC_LINKING_ONLY
#include <gtest/gtest.h>
#include <zstd.h>

#include <memory>

#include "common/byte_shuffle.h"
#include "common/zstd_codec.h"
#include "tests/support/random_bytes.h"

namespace sg {
namespace {

using testing::Float32Weights;
using testing::RandomBytes;

struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};

// What a reader of any release does with a stored frame: one zstd frame,
// decoded by libzstd alone.
std::string PlainZstdDecode(const std::string& stored, size_t raw_size) {
  EXPECT_EQ(ZSTD_findFrameCompressedSize(stored.data(), stored.size()), stored.size());
  std::string out(raw_size, '\0');
  const size_t n = ZSTD_decompress(out.data(), out.size(), stored.data(), stored.size());
  EXPECT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
  out.resize(ZSTD_isError(n) ? 0 : n);
  return out;
}

// Plane 0 repeats a short random run over and over (matches find it, a
// Huffman code of its bytes cannot); the others are random.
std::string PlanesWithRepeatsInTheFirst(size_t plane) {
  const std::string run = RandomBytes(1000, 3);
  std::string planes;
  while (planes.size() < plane) planes += run;
  planes.resize(plane);
  for (unsigned k = 1; k < 4; ++k) planes += RandomBytes(plane, k);
  return planes;
}

TEST(LiteralPlanes, FloatPlanesGoAsLiteralsAndRepeatsThroughTheMatchFinder) {
  std::unique_ptr<ZSTD_CCtx, CCtxFree> probe(ZSTD_createCCtx());
  const std::string planes = ShuffleBytes(Float32Weights(1 << 20, 4), 4);
  PlaneLayout floats{planes.data(), planes.size(), planes.size() / 4, 4, 0};
  ChooseLiteralPlanes(probe.get(), 1, floats);
  EXPECT_EQ(floats.literal_planes, 0xfu) << "mantissa planes are noise; the exponent plane "
                                            "codes smaller as literals than with matches";
  const std::string mixed = PlanesWithRepeatsInTheFirst(1 << 20);
  PlaneLayout repeats{mixed.data(), mixed.size(), mixed.size() / 4, 4, 0};
  ChooseLiteralPlanes(probe.get(), 1, repeats);
  EXPECT_EQ(repeats.literal_planes, 0xeu);
}

TEST(LiteralPlanes, ShuffledFramesAreOnePlainZstdFrameNoLargerThanMatchesAlone) {
  for (const size_t count : {size_t{2} << 20, size_t{100'003}, size_t{1}}) {
    for (const int width : {2, 4}) {
      const std::string raw = Float32Weights(count, 7) + std::string(width == 2 ? 3 : 1, 'x');
      const Codec codec = width == 2 ? Codec::kZstdShuffle2 : Codec::kZstdShuffle4;
      auto stored = EncodeFrame(codec, raw, 1);
      ASSERT_TRUE(stored.ok());
      // The planes zstd decodes, which the reader then un-shuffles.
      EXPECT_EQ(UnshuffleBytes(PlainZstdDecode(*stored, raw.size()), width), raw);
      auto decoded = DecodeFrame(codec, *stored, raw.size());
      ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
      EXPECT_EQ(*decoded, raw);
      const std::string planes = ShuffleBytes(raw, width);
      std::string matches(ZSTD_compressBound(planes.size()), '\0');
      matches.resize(ZSTD_compress(matches.data(), matches.size(), planes.data(), planes.size(), 1));
      EXPECT_LE(stored->size(), matches.size() + 64) << count << " values, width " << width;
    }
  }
}

TEST(LiteralPlanes, FramesWithPlanesOfBothKindsRoundTrip) {
  const std::string planes = PlanesWithRepeatsInTheFirst(3 << 20);
  const std::string raw = UnshuffleBytes(planes, 4);
  auto stored = EncodeFrame(Codec::kZstdShuffle4, raw, 1);
  ASSERT_TRUE(stored.ok());
  EXPECT_LT(stored->size(), raw.size() * 3 / 4 + (64 << 10)) << "the repeats were found";
  EXPECT_EQ(UnshuffleBytes(PlainZstdDecode(*stored, raw.size()), 4), raw);
}

}  // namespace
}  // namespace sg
