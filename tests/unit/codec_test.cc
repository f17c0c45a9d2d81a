#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <latch>
#include <random>
#include <thread>

#include "common/ordered_pipeline.h"
#include "common/zstd_codec.h"
#include "tests/support/random_bytes.h"

namespace sg {
namespace {

using testing::RandomBytes;

// A stored frame decoded whole: fed in one piece to FrameStreamDecoder.
Status DecodeWhole(Codec codec, std::string_view stored, uint64_t raw_size, size_t piece,
                   bool check_zstd_checksum, std::string* scratch, std::string* piece_buf,
                   const std::function<Status(std::string_view)>& each) {
  FrameStreamDecoder d;
  d.Begin(codec, raw_size, check_zstd_checksum, scratch);
  SG_RETURN_IF_ERROR(d.Feed(stored));
  return d.Finish(piece, piece_buf, each);
}

TEST(ZstdCodec, ShuffleGroupsBytesIntoPlanesAndKeepsTheTail) {
  EXPECT_EQ(ShuffleBytes("aAbBcC", 2), "abcABC");
  EXPECT_EQ(ShuffleBytes("aAbBcCd", 2), "abcABCd");
  EXPECT_EQ(ShuffleBytes("0123456789", 4),
            "04152637"
            "89");
  for (int width : {2, 4}) {
    for (size_t n : {0, 1, 3, 4, 5, 1000, 1001}) {
      const std::string in = RandomBytes(n, static_cast<unsigned>(n));
      EXPECT_EQ(UnshuffleBytes(ShuffleBytes(in, width), width), in) << width << " " << n;
    }
  }
}

// The definition, byte by byte: what the vector loops must equal.
std::string ReferenceShuffle(std::string_view in, size_t w) {
  const size_t groups = in.size() / w;
  std::string out(in);
  for (size_t g = 0; g < groups; ++g) {
    for (size_t p = 0; p < w; ++p) out[p * groups + g] = in[g * w + p];
  }
  return out;
}

TEST(ZstdCodec, TheVectorShuffleEqualsTheDefinitionAtEveryLength) {
  // Lengths around the 16-group blocks of the vector loops, and a frame.
  std::vector<size_t> sizes;
  for (size_t n = 0; n <= 200; ++n) sizes.push_back(n);
  for (size_t n : {1023u, 1024u, 1025u, 4099u, 8u << 20}) sizes.push_back(n);
  for (size_t w : {2u, 4u}) {
    for (size_t n : sizes) {
      const std::string in = RandomBytes(n, static_cast<unsigned>(n * 7 + w));
      const std::string planes = ShuffleBytes(in, static_cast<int>(w));
      ASSERT_EQ(planes, ReferenceShuffle(in, w)) << "width " << w << ", " << n << " bytes";
      ASSERT_EQ(UnshuffleBytes(planes, static_cast<int>(w)), in) << "width " << w << ", " << n;
    }
  }
  // Into a buffer at an odd address (the loops use unaligned loads and stores).
  const std::string in = RandomBytes(1000, 5);
  std::string out(1001, '\0');
  ShuffleInto(in.data(), in.size(), 4, out.data() + 1);
  EXPECT_EQ(out.substr(1), ReferenceShuffle(in, 4));
  EXPECT_EQ(ShuffleBytes("abc", 1), "abc");
}

// Any piece of a frame un-shuffles to the same bytes as the whole frame
// does: every start (a multiple of the width) and end around the 16-group
// blocks and the tail, at sizes with and without a tail.
TEST(ZstdCodec, UnshufflePartEqualsThePieceOfTheWhole) {
  for (size_t w : {1u, 2u, 4u}) {
    for (size_t n : {0u, 3u, 64u, 67u, 130u, 263u}) {
      const std::string raw = RandomBytes(n, static_cast<unsigned>(n * 3 + w));
      const std::string planes = ShuffleBytes(raw, static_cast<int>(w));
      for (size_t begin = 0; begin <= n; begin += w) {
        for (size_t end = begin; end <= n; ++end) {
          if (end % w != 0 && end != n) continue;
          std::string out(end - begin + 1, '#');
          UnshufflePart(planes.data(), n, static_cast<int>(w), begin, end, out.data());
          ASSERT_EQ(out.substr(0, end - begin), raw.substr(begin, end - begin))
              << "width " << w << ", " << n << " bytes, [" << begin << ", " << end << ")";
          ASSERT_EQ(out.back(), '#') << "wrote past the piece";
        }
      }
    }
  }
}

// A frame decoded whole gives the frame's bytes in order, no piece
// larger than asked, for every codec; a damaged frame fails before any
// piece is handed on.
TEST(ZstdCodec, AWholeFrameIsHandedOnInOrder) {
  const std::string raw = RandomBytes(70'001, 9) + std::string(30'000, 'z');
  for (Codec c : {Codec::kNone, Codec::kZstd, Codec::kZstdShuffle2, Codec::kZstdShuffle4}) {
    const std::string enc = *EncodeFrame(c, raw, 1);
    for (size_t piece : {4u, 4096u, 10'002u, 1u << 20}) {
      std::string got, scratch, buf;
      size_t largest = 0;
      Status st =
          DecodeWhole(c, enc, raw.size(), piece, true, &scratch, &buf, [&](std::string_view p) {
            largest = std::max(largest, p.size());
            got += p;
            return Status::Ok();
          });
      ASSERT_TRUE(st.ok()) << CodecName(c) << ": " << st.ToString();
      EXPECT_EQ(got, raw) << CodecName(c) << ", pieces of " << piece;
      EXPECT_LE(largest, piece) << CodecName(c);
    }
    std::string damaged = enc, scratch, buf;
    damaged[damaged.size() / 2] ^= 0x10;
    int calls = 0;
    Status st = DecodeWhole(c, damaged.substr(0, damaged.size() - 1), raw.size(), 4096, true,
                            &scratch, &buf, [&](std::string_view) {
                              ++calls;
                              return Status::Ok();
                            });
    EXPECT_TRUE(st.Is(StatusCode::kCorruption)) << CodecName(c) << ": " << st.ToString();
    EXPECT_EQ(calls, 0) << CodecName(c);
  }
}

// Fed in pieces of any size, split anywhere (inside zstd's block headers
// too), a frame decodes to what it decodes to whole, for every codec.
TEST(FrameStreamDecoder, FramesFedInPiecesOfAnySizeDecodeAsWhole) {
  const std::string raw = RandomBytes(300'001, 5) + std::string(200'000, 'k');
  std::mt19937 rng(17);
  for (Codec c : {Codec::kNone, Codec::kZstd, Codec::kZstdShuffle2, Codec::kZstdShuffle4}) {
    const std::string enc = *EncodeFrame(c, raw, 1);
    for (size_t piece : {1u, 7u, 4096u, 131'075u, 0u /* random */}) {
      std::string scratch, buf, got;
      FrameStreamDecoder d;
      d.Begin(c, raw.size(), true, &scratch);
      for (size_t at = 0; at < enc.size();) {
        const size_t n = std::min(enc.size() - at, piece ? piece : 1 + rng() % 200'000);
        ASSERT_TRUE(d.Feed(std::string_view(enc).substr(at, n)).ok()) << CodecName(c) << " " << at;
        at += n;
      }
      ASSERT_TRUE(d.Finish(65536, &buf,
                           [&](std::string_view p) {
                             got += p;
                             return Status::Ok();
                           })
                      .ok())
          << CodecName(c);
      EXPECT_TRUE(got == raw) << CodecName(c) << ", pieces of " << piece;
    }
  }
}

// A stored-as-is frame that comes whole in one piece (every frame from a
// file:// store) is handed on where it lies: the scratch is not touched.
TEST(FrameStreamDecoder, AWholeRawFrameIsNotCopied) {
  const std::string raw = RandomBytes(200'000, 8);
  std::string scratch, buf, got;
  FrameStreamDecoder d;
  d.Begin(Codec::kNone, raw.size(), true, &scratch);
  ASSERT_TRUE(d.Feed(raw).ok());
  ASSERT_TRUE(
      d.Finish(65536, &buf, [&](std::string_view p) {
         EXPECT_TRUE(p.data() >= raw.data() && p.data() + p.size() <= raw.data() + raw.size())
             << "a piece not from the fed bytes";
         got += p;
         return Status::Ok();
       }).ok());
  EXPECT_TRUE(got == raw);
  EXPECT_EQ(scratch.size(), 0u);
  // In two pieces it is gathered in the scratch.
  got.clear();
  d.Begin(Codec::kNone, raw.size(), true, &scratch);
  ASSERT_TRUE(d.Feed(std::string_view(raw).substr(0, 1000)).ok());
  ASSERT_TRUE(d.Feed(std::string_view(raw).substr(1000)).ok());
  ASSERT_TRUE(d.Finish(65536, &buf, [&](std::string_view p) {
                 got += p;
                 return Status::Ok();
               }).ok());
  EXPECT_TRUE(got == raw);
  EXPECT_EQ(scratch.size(), raw.size());
}

// A frame cut short fails at Finish, before any byte is handed on; bytes past
// its end fail as they are fed; one that holds more or fewer bytes than the
// manifest says fails; Begin starts a frame over.
TEST(FrameStreamDecoder, ShortLongAndMisSizedFramesFail) {
  const std::string raw = RandomBytes(100'000, 6) + std::string(100'000, 'm');
  std::string scratch, buf;
  int calls = 0;
  auto count = [&](std::string_view) {
    ++calls;
    return Status::Ok();
  };
  for (Codec c : {Codec::kNone, Codec::kZstd, Codec::kZstdShuffle4}) {
    const std::string enc = *EncodeFrame(c, raw, 1);
    FrameStreamDecoder d;
    d.Begin(c, raw.size(), true, &scratch);
    ASSERT_TRUE(d.Feed(std::string_view(enc).substr(0, enc.size() - 1)).ok());
    EXPECT_TRUE(d.Finish(4096, &buf, count).Is(StatusCode::kCorruption)) << CodecName(c);
    EXPECT_EQ(calls, 0) << CodecName(c);

    d.Begin(c, raw.size(), true, &scratch);  // over again, whole this time
    ASSERT_TRUE(d.Feed(enc).ok()) << CodecName(c);
    EXPECT_TRUE(d.Feed("x").Is(StatusCode::kCorruption)) << CodecName(c) << ": trailing byte";
    ASSERT_TRUE(d.Finish(4096, &buf, count).ok()) << CodecName(c);
    EXPECT_GT(calls, 0);
    calls = 0;

    d.Begin(c, raw.size() - 1000, true, &scratch);  // the manifest says less
    Status fed = d.Feed(enc);
    EXPECT_TRUE(!fed.ok() || !d.Finish(4096, &buf, count).ok()) << CodecName(c);
    d.Begin(c, raw.size() + 1000, true, &scratch);  // the manifest says more
    fed = d.Feed(enc);
    EXPECT_TRUE(!fed.ok() || !d.Finish(4096, &buf, count).ok()) << CodecName(c);
    EXPECT_EQ(calls, 0) << CodecName(c);
  }
}

// zstd's own checksum (the XXH64 in the frame's last 4 bytes) is checked
// unless the caller says it checks a digest of the bytes itself.
TEST(ZstdCodec, TheZstdChecksumIsSkippedOnlyWhenAsked) {
  const std::string raw(50'000, 'q');
  std::string enc = *EncodeFrame(Codec::kZstd, raw, 3);
  enc.back() ^= 0x01;  // the checksum, not the content
  std::string got, scratch, buf;
  auto collect = [&](std::string_view p) {
    got += p;
    return Status::Ok();
  };
  EXPECT_TRUE(DecodeWhole(Codec::kZstd, enc, raw.size(), 4096, true, &scratch, &buf, collect)
                  .Is(StatusCode::kCorruption));
  got.clear();
  ASSERT_TRUE(
      DecodeWhole(Codec::kZstd, enc, raw.size(), 4096, false, &scratch, &buf, collect).ok());
  EXPECT_EQ(got, raw);
  EXPECT_TRUE(DecodeFrame(Codec::kZstd, enc, raw.size()).status().Is(StatusCode::kCorruption))
      << "other decoders still check it";
}

TEST(ZstdCodec, EveryCodecRoundTrips) {
  const std::string raw = RandomBytes(100'000, 1) + std::string(100'000, 'x');
  for (Codec c : {Codec::kNone, Codec::kZstd, Codec::kZstdShuffle2, Codec::kZstdShuffle4}) {
    auto enc = EncodeFrame(c, raw, 3);
    ASSERT_TRUE(enc.ok());
    auto dec = DecodeFrame(c, *enc, raw.size());
    ASSERT_TRUE(dec.ok()) << CodecName(c) << ": " << dec.status().ToString();
    EXPECT_EQ(*dec, raw) << CodecName(c);
    EXPECT_EQ(*ParseCodec(CodecName(c)), c);
  }
}

TEST(ZstdCodec, DamagedOrMisdescribedFramesAreCorruption) {
  const std::string raw(50'000, 'q');
  std::string enc = *EncodeFrame(Codec::kZstd, raw, 3);
  EXPECT_TRUE(DecodeFrame(Codec::kZstd, enc, raw.size() + 1).status().Is(StatusCode::kCorruption));
  EXPECT_TRUE(DecodeFrame(Codec::kZstd, enc.substr(0, enc.size() - 2), raw.size())
                  .status()
                  .Is(StatusCode::kCorruption));
  EXPECT_TRUE(
      DecodeFrame(Codec::kZstd, enc + "xx", raw.size()).status().Is(StatusCode::kCorruption));
  enc[enc.size() / 2] ^= 0x20;
  EXPECT_TRUE(DecodeFrame(Codec::kZstd, enc, raw.size()).status().Is(StatusCode::kCorruption));
  EXPECT_TRUE(DecodeFrame(Codec::kNone, "abc", 4).status().Is(StatusCode::kCorruption));
  EXPECT_FALSE(ParseCodec("lz4").ok());
}

TEST(ZstdCodec, ChoosesShuffleOnlyWhenItSavesThreePercent) {
  // Little-endian floats near 1.0: exponent bytes repeat, mantissas vary.
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(1.0f, 0.01f);
  std::string floats(1 << 20, '\0');
  for (size_t i = 0; i < floats.size(); i += 4) {
    const float v = dist(rng);
    std::memcpy(&floats[i], &v, 4);
  }
  const std::string noise = RandomBytes(1 << 20, 2);
  const std::string text(1 << 20, 't');
  EXPECT_EQ(ChooseCodec({floats}, ShufflePolicy::kAuto, 3), Codec::kZstdShuffle4);
  EXPECT_EQ(ChooseCodec({floats}, ShufflePolicy::kOff, 3), Codec::kZstd);
  EXPECT_EQ(ChooseCodec({noise}, ShufflePolicy::kAuto, 3), Codec::kNone);
  EXPECT_EQ(ChooseCodec({text}, ShufflePolicy::kAuto, 3), Codec::kZstd);
  EXPECT_EQ(ChooseCodec({text}, ShufflePolicy::kTwo, 3), Codec::kZstdShuffle2);
}

// Workers start as tasks need them, up to the bound: a snapshot of one small
// file starts one thread, not files_in_flight (each start is a stack and,
// under the sanitizers, shadow memory).
TEST(BoundedExecutor, StartsAWorkerOnlyWhenATaskFindsNoFreeOne) {
  BoundedExecutor executor(8, 8);
  EXPECT_EQ(executor.started(), 0);
  ASSERT_TRUE(executor.Submit([] { return Status::Ok(); }).ok());
  ASSERT_TRUE(executor.Wait().ok());
  EXPECT_EQ(executor.started(), 1);
  // Three tasks that each wait until all three run: they need three workers
  // (with fewer, this would never end).
  std::latch all(3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(executor
                    .Submit([&] {
                      all.arrive_and_wait();
                      return Status::Ok();
                    })
                    .ok());
  }
  ASSERT_TRUE(executor.Wait().ok());
  EXPECT_GE(executor.started(), 3);
  EXPECT_LE(executor.started(), 4);
}

TEST(OrderedPipeline, DeliversResultsInSubmissionOrder) {
  BoundedExecutor executor(4, 8);
  std::vector<int> seen;
  OrderedPipeline<int> pipeline(executor, 6, [&](int v) {
    seen.push_back(v);
    return Status::Ok();
  });
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(pipeline
                    .Submit([i]() -> StatusOr<int> {
                      // Later tasks often finish first.
                      std::this_thread::sleep_for(std::chrono::microseconds((50 - i) % 7 * 300));
                      return i;
                    })
                    .ok());
  }
  ASSERT_TRUE(pipeline.Finish().ok());
  std::vector<int> want(50);
  for (int i = 0; i < 50; ++i) want[i] = i;
  EXPECT_EQ(seen, want);
}

TEST(OrderedPipeline, TheFirstErrorStopsDeliveryAndIsReturned) {
  BoundedExecutor executor(2, 4);
  std::vector<int> seen;
  OrderedPipeline<int> pipeline(executor, 4, [&](int v) {
    seen.push_back(v);
    return Status::Ok();
  });
  Status submitted;
  for (int i = 0; i < 20 && submitted.ok(); ++i) {
    submitted = pipeline.Submit([i]() -> StatusOr<int> {
      if (i == 5) return Status::Corruption("frame 5 is bad");
      return i;
    });
  }
  Status st = pipeline.Finish();
  EXPECT_EQ(st.message(), "frame 5 is bad");
  // The sink got an in-order prefix that stops before the bad frame. How long
  // a prefix depends on timing: once frame 5 has failed, frames 3 and 4 may
  // finish later and are dropped with everything after them.
  ASSERT_LE(seen.size(), 5u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int>(i));
}

}  // namespace
}  // namespace sg
