// Byte planes (the "shuffle" of blosc-style codecs): for width w, the planes
// of n bytes are all bytes i*w+0, then all bytes i*w+1, ...; the n % w bytes
// that do not fill a group are copied unchanged at the end. Floating-point
// tensors compress better as planes: the exponent bytes of neighbouring
// values are alike (docs/format.md, "Codecs").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sg {

// `n` bytes at `src` to planes at `dst` (width 1: a copy). The two ranges
// must not overlap. Widths 2 and 4 use SSE2 on x86-64 (part of its
// baseline, so no CPU check), a portable loop elsewhere; both give the same
// bytes as the reference loop in tests/unit/codec_test.cc.
void ShuffleInto(const char* src, size_t n, int width, char* dst);
// The inverse of ShuffleInto.
void UnshuffleInto(const char* src, size_t n, int width, char* dst);
// Bytes [begin, end) of what UnshuffleInto makes of the `n` bytes at `src`,
// to dst[0, end - begin): a frame un-shuffled a piece at a time, each piece
// small enough to stay in the cache for what reads it next. `begin` must be
// a multiple of `width`, and so must `end` unless it is `n`.
void UnshufflePart(const char* src, size_t n, int width, size_t begin, size_t end, char* dst);

std::string ShuffleBytes(std::string_view in, int width);
std::string UnshuffleBytes(std::string_view in, int width);

}  // namespace sg
