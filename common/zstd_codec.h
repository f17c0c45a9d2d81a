// Frame codecs for snapshot objects (zstd, wrapped only here). A stored
// object is a sequence of independent frames, each encoding a fixed-size
// slice of the raw file, so frames can be compressed and decompressed in
// parallel and an object of codec zstd is a plain zstd stream that the
// `zstd -d` command reads. docs/format.md describes the byte layout.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/byte_shuffle.h"
#include "common/status.h"

namespace sg {

enum class Codec {
  kNone,          // stored as is
  kZstd,          // one zstd frame per slice
  kZstdShuffle2,  // bytes split into 2 planes per slice, then zstd (bf16/fp16 tensors)
  kZstdShuffle4,  // 4 planes (fp32 tensors)
};

std::string_view CodecName(Codec codec);  // "none", "zstd", "zstd+shuffle2", "zstd+shuffle4"
StatusOr<Codec> ParseCodec(std::string_view name);
int ShuffleWidth(Codec codec);  // 1 when the codec does not shuffle

// Encodes one slice into one stored frame (zstd frames carry their content
// size and an XXH64 checksum).
StatusOr<std::string> EncodeFrame(Codec codec, std::string_view raw, int level);
// Decodes one stored frame that must yield exactly `raw_size` bytes.
StatusOr<std::string> DecodeFrame(Codec codec, std::string_view stored, uint64_t raw_size);
// The same into `out`, whose memory is reused when it is large enough
// (restore keeps one per worker); `scratch` holds the byte planes of a
// shuffled codec. `out` holds exactly `raw_size` bytes on success.
Status DecodeFrameInto(Codec codec, std::string_view stored, uint64_t raw_size, std::string* out,
                       std::string* scratch);
// Decodes one stored frame whose bytes arrive in pieces (a ranged read, as
// its body comes, or the whole frame at once). zstd decodes straight from
// each piece into `scratch`, and copies only a block that straddles two
// pieces into its own buffer: nothing is gathered first. Begin, Feed the
// frame's stored bytes in order, then Finish, which hands the raw bytes to
// `each` in order, at most `piece` bytes at a time: a shuffled frame is
// un-shuffled one piece at a time into `piece_buf`, so the piece is still in
// the cache when `each` hashes and writes it; other pieces are views of
// `scratch`. Writing a file in small pieces also costs the kernel far less
// than in 8 MiB writes (docs/design.md §7). Without `check_zstd_checksum`,
// zstd's own XXH64 of the frame is not checked: for a caller that checks a
// digest of the bytes itself. A bad frame fails before `each` is called;
// `each`'s error ends the decoding. One decoder per thread at a time (it
// uses the thread's zstd context); Begin again starts over. A frame of codec
// none fed whole in one piece is not copied: Finish hands on that piece's
// bytes, so it must come before they change.
class FrameStreamDecoder {
 public:
  void Begin(Codec codec, uint64_t raw_size, bool check_zstd_checksum, std::string* scratch);
  // Corruption when the bytes are not a zstd frame of raw_size bytes, or
  // run on past its end.
  Status Feed(std::string_view bytes);
  // Checks that the frame was whole, then hands its raw bytes to `each`.
  Status Finish(size_t piece, std::string* piece_buf,
                const std::function<Status(std::string_view)>& each);

 private:
  Codec codec_ = Codec::kNone;
  uint64_t raw_size_ = 0;
  std::string* scratch_ = nullptr;
  std::string_view in_place_;  // codec none, fed whole in one piece
  uint64_t out_pos_ = 0;
  bool ended_ = false;  // zstd saw the end of the frame
};

// Decodes one zstd frame that declares its content size, refusing one that
// declares more than `max_size` bytes (a stored log segment, say).
StatusOr<std::string> DecodeSizedFrame(std::string_view stored, uint64_t max_size);

// Which codec to use for data like `samples`: with shuffle "auto", the
// shuffled codec whose output is at least 3% smaller than plain zstd's wins;
// kNone when zstd saves less than 3% over the raw bytes.
enum class ShufflePolicy { kAuto, kOff, kTwo, kFour };
Codec ChooseCodec(const std::vector<std::string_view>& samples, ShufflePolicy policy, int level);

}  // namespace sg
