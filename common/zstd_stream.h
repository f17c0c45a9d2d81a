// A zstd stream decoded piece by piece with bounded memory, for data whose
// decoded size is not to be trusted (a stored log segment). The codec is
// wrapped in common/zstd_codec.cc.
#pragma once

#include <functional>
#include <string_view>

#include "common/status.h"

namespace sg {

// Decodes a zstd stream (one frame, or frames one after another as `zstd -d`
// reads them) and hands its bytes to `each` as they come, at most `piece`
// bytes at a time. Memory stays at `piece` plus zstd's window, and a frame
// whose window is past 2^kMaxStreamWindowLog bytes is refused, however much
// the stream decodes to (a stored log segment: a few KB that claim a GiB
// cost no more). `each`'s error ends the decoding.
inline constexpr int kMaxStreamWindowLog = 23;  // 8 MiB
Status DecodeZstdInPieces(std::string_view stored, size_t piece,
                          const std::function<Status(std::string_view)>& each);

}  // namespace sg
