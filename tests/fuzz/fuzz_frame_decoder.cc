// libFuzzer target: common/zstd_codec DecodeFrame (zstd, zstd+shuffle2/4,
// none) on arbitrary stored frames, the same frames fed to FrameStreamDecoder
// in pieces, and Encode/Decode and Shuffle/Unshuffle round trips on
// arbitrary raw bytes.
//
// Input: byte 0 picks the mode and codec (bits 2-5: the streamed pieces'
// size, 1 << n bytes), bytes 1..4 the expected raw size
// (little endian, capped at 4 MiB so one input never allocates more), the
// rest is the stored frame (decode mode) or the raw slice (round-trip mode).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/zstd_codec.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr sg::Codec kCodecs[] = {sg::Codec::kNone, sg::Codec::kZstd, sg::Codec::kZstdShuffle2,
                                 sg::Codec::kZstdShuffle4};
constexpr uint64_t kMaxRaw = 4u << 20;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const sg::Codec codec = kCodecs[data[0] & 3];
  const bool round_trip = (data[0] & 0x80) != 0;
  uint64_t raw_size = 0;
  for (int i = 0; i < 4; ++i) raw_size |= static_cast<uint64_t>(data[1 + i]) << (8 * i);
  raw_size %= kMaxRaw + 1;
  const std::string_view rest(reinterpret_cast<const char*>(data + 5), size - 5);

  if (!round_trip) {
    auto out = sg::DecodeFrame(codec, rest, raw_size);
    // Whatever it accepts has exactly the size the manifest promised.
    if (out.ok()) SG_FUZZ_CHECK(out->size() == raw_size, "decoded to the wrong size");
    // Streamed in pieces, the frame never decodes to other bytes. (It may
    // refuse what the whole-frame decoder takes, e.g. a window larger than
    // a streaming decoder allows.)
    const size_t piece = size_t{1} << ((data[0] >> 2) & 15);
    std::string scratch, buf, streamed;
    sg::FrameStreamDecoder d;
    d.Begin(codec, raw_size, true, &scratch);
    sg::Status st;
    for (size_t at = 0; st.ok() && at < rest.size(); at += piece) st = d.Feed(rest.substr(at, piece));
    if (st.ok()) {
      st = d.Finish(4096, &buf, [&](std::string_view p) {
        streamed.append(p);
        return sg::Status::Ok();
      });
    }
    if (st.ok()) {
      SG_FUZZ_CHECK(streamed.size() == raw_size, "streamed to the wrong size");
      if (out.ok()) SG_FUZZ_CHECK(streamed == *out, "streamed to other bytes than decoded whole");
    }
    return 0;
  }
  const int width = sg::ShuffleWidth(codec);
  SG_FUZZ_CHECK(sg::UnshuffleBytes(sg::ShuffleBytes(rest, width), width) == rest,
                "unshuffle does not undo shuffle");
  auto stored = sg::EncodeFrame(codec, rest, 1);
  SG_FUZZ_CHECK(stored.ok(), "encoding failed");
  auto back = sg::DecodeFrame(codec, *stored, rest.size());
  SG_FUZZ_CHECK(back.ok() && *back == rest, "decode(encode(x)) != x");
  if (rest.size() > 0 && codec != sg::Codec::kNone) {
    // The same frame promised one byte short must be refused, not truncated.
    SG_FUZZ_CHECK(!sg::DecodeFrame(codec, *stored, rest.size() - 1).ok(),
                  "a frame larger than declared was accepted");
  }
  return 0;
}
