#include "common/byte_shuffle.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define SG_SHUFFLE_SSE2 1
#endif

namespace sg {
namespace {

// The portable loops, for the groups the vector loops leave (and for every
// group where there is no SSE2).
void ShuffleTail(const char* src, size_t from, size_t groups, size_t w, char* dst) {
  for (size_t plane = 0; plane < w; ++plane) {
    char* out = dst + plane * groups;
    for (size_t g = from; g < groups; ++g) out[g] = src[g * w + plane];
  }
}

// Groups [from, end) of planes of `groups` groups, to `dst` (where group
// `first` goes to dst[0]).
void UnshuffleTail(const char* src, size_t from, size_t end, size_t groups, size_t w,
                   size_t first, char* dst) {
  for (size_t plane = 0; plane < w; ++plane) {
    const char* in = src + plane * groups;
    for (size_t g = from; g < end; ++g) dst[(g - first) * w + plane] = in[g];
  }
}

#ifdef SG_SHUFFLE_SSE2
__m128i Load(const char* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
void Store(char* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }

// The even bytes of a then b (16 of 32), and the odd ones.
__m128i Evens(__m128i a, __m128i b) {
  const __m128i low = _mm_set1_epi16(0x00ff);
  return _mm_packus_epi16(_mm_and_si128(a, low), _mm_and_si128(b, low));
}
__m128i Odds(__m128i a, __m128i b) {
  return _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8));
}

// 16 groups at a time; returns the groups done.
size_t ShuffleVector(const char* src, size_t groups, size_t w, char* dst) {
  size_t g = 0;
  if (w == 2) {
    for (; g + 16 <= groups; g += 16) {
      const __m128i v0 = Load(src + 2 * g), v1 = Load(src + 2 * g + 16);
      Store(dst + g, Evens(v0, v1));
      Store(dst + groups + g, Odds(v0, v1));
    }
  } else if (w == 4) {
    // Two rounds of splitting even from odd bytes: the first gives planes
    // 0+2 and 1+3 interleaved, the second each plane.
    for (; g + 16 <= groups; g += 16) {
      const char* s = src + 4 * g;
      const __m128i v0 = Load(s), v1 = Load(s + 16), v2 = Load(s + 32), v3 = Load(s + 48);
      const __m128i e0 = Evens(v0, v1), e1 = Evens(v2, v3);
      const __m128i o0 = Odds(v0, v1), o1 = Odds(v2, v3);
      Store(dst + g, Evens(e0, e1));
      Store(dst + groups + g, Evens(o0, o1));
      Store(dst + 2 * groups + g, Odds(e0, e1));
      Store(dst + 3 * groups + g, Odds(o0, o1));
    }
  }
  return g;
}

// Groups [first, end), 16 at a time, to `dst` as UnshuffleTail; returns
// the group it stopped at.
size_t UnshuffleVector(const char* src, size_t first, size_t end, size_t groups, size_t w,
                       char* dst) {
  size_t g = first;
  if (w == 2) {
    for (; g + 16 <= end; g += 16) {
      const __m128i a = Load(src + g), b = Load(src + groups + g);
      Store(dst + 2 * (g - first), _mm_unpacklo_epi8(a, b));
      Store(dst + 2 * (g - first) + 16, _mm_unpackhi_epi8(a, b));
    }
  } else if (w == 4) {
    for (; g + 16 <= end; g += 16) {
      const __m128i a = Load(src + g), b = Load(src + groups + g);
      const __m128i c = Load(src + 2 * groups + g), d = Load(src + 3 * groups + g);
      const __m128i ab_lo = _mm_unpacklo_epi8(a, b), ab_hi = _mm_unpackhi_epi8(a, b);
      const __m128i cd_lo = _mm_unpacklo_epi8(c, d), cd_hi = _mm_unpackhi_epi8(c, d);
      char* out = dst + 4 * (g - first);
      Store(out, _mm_unpacklo_epi16(ab_lo, cd_lo));
      Store(out + 16, _mm_unpackhi_epi16(ab_lo, cd_lo));
      Store(out + 32, _mm_unpacklo_epi16(ab_hi, cd_hi));
      Store(out + 48, _mm_unpackhi_epi16(ab_hi, cd_hi));
    }
  }
  return g;
}
#else
size_t ShuffleVector(const char*, size_t, size_t, char*) { return 0; }
size_t UnshuffleVector(const char*, size_t first, size_t, size_t, size_t, char*) {
  return first;
}
#endif

}  // namespace

void ShuffleInto(const char* src, size_t n, int width, char* dst) {
  const size_t w = width > 1 ? static_cast<size_t>(width) : 1;
  const size_t groups = n / w;
  if (w == 1) {
    if (n > 0) std::memcpy(dst, src, n);
    return;
  }
  ShuffleTail(src, ShuffleVector(src, groups, w, dst), groups, w, dst);
  if (n > groups * w) std::memcpy(dst + groups * w, src + groups * w, n - groups * w);
}

void UnshuffleInto(const char* src, size_t n, int width, char* dst) {
  UnshufflePart(src, n, width, 0, n, dst);
}

void UnshufflePart(const char* src, size_t n, int width, size_t begin, size_t end, char* dst) {
  const size_t w = width > 1 ? static_cast<size_t>(width) : 1;
  end = std::min(end, n);
  if (begin >= end) return;
  if (w == 1) {
    std::memcpy(dst, src + begin, end - begin);
    return;
  }
  const size_t groups = n / w;
  const size_t whole = groups * w;  // bytes [whole, n) are copied unchanged
  if (begin < whole) {
    // `begin` is a multiple of w; `end` is too, or lies in the copied tail.
    const size_t first = begin / w, last = std::min(end, whole) / w;
    const size_t g = UnshuffleVector(src, first, last, groups, w, dst);
    UnshuffleTail(src, g, last, groups, w, first, dst);
  }
  if (end > whole) {
    const size_t from = std::max(begin, whole);
    std::memcpy(dst + (from - begin), src + from, end - from);
  }
}

std::string ShuffleBytes(std::string_view in, int width) {
  std::string out(in.size(), '\0');
  ShuffleInto(in.data(), in.size(), width, out.data());
  return out;
}

std::string UnshuffleBytes(std::string_view in, int width) {
  std::string out(in.size(), '\0');
  UnshuffleInto(in.data(), in.size(), width, out.data());
  return out;
}

}  // namespace sg
