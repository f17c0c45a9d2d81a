#include "common/zstd_literal_planes.h"

// The sequence producer API is among zstd's experimental ones (1.5.4 on).
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <algorithm>
#include <string>

namespace sg {
namespace {

#if ZSTD_VERSION_NUMBER >= 10504
constexpr bool kHaveSequenceProducer = true;
#else
constexpr bool kHaveSequenceProducer = false;
#endif

// Bytes probed per plane, from its middle: one zstd block's worth would
// cost as much to probe as a quarter of the plane's own compression.
constexpr size_t kProbeBytes = 32 << 10;

// The plane that the byte at `offset` of a shuffled frame belongs to.
int PlaneOf(const PlaneLayout& layout, size_t offset) {
  if (layout.plane_size == 0) return 0;
  return static_cast<int>(std::min<size_t>(offset / layout.plane_size, layout.width - 1));
}

#if ZSTD_VERSION_NUMBER >= 10504
// zstd calls this for each block (up to 128 KiB) of the frame. A block that
// lies within literal planes is one sequence of literals and no match; any
// other block (or one zstd hands over from a buffer of its own) gets an
// error, which makes zstd fall back to its own match finder for it
// (ZSTD_c_enableSeqProducerFallback).
size_t ProduceSequences(void* state, ZSTD_Sequence* out, size_t capacity, const void* src,
                        size_t size, const void*, size_t, int, size_t) {
  const auto& layout = *static_cast<const PlaneLayout*>(state);
  if (size == 0) return 0;
  const auto at = reinterpret_cast<uintptr_t>(src);
  const auto base = reinterpret_cast<uintptr_t>(layout.base);
  if (capacity < 1 || at < base || at - base > layout.size || size > layout.size - (at - base)) {
    return ZSTD_SEQUENCE_PRODUCER_ERROR;
  }
  const size_t begin = at - base;
  for (int k = PlaneOf(layout, begin); k <= PlaneOf(layout, begin + size - 1); ++k) {
    if ((layout.literal_planes & (1u << k)) == 0) return ZSTD_SEQUENCE_PRODUCER_ERROR;
  }
  out[0] = ZSTD_Sequence{0, static_cast<unsigned>(size), 0, 0};
  return 1;
}
#endif

// The compressed size of `size` bytes at `data`, at `level`, literals only
// or not; `size` (no gain) when it fails.
size_t ProbeSize(ZSTD_CCtx* probe, int level, const char* data, size_t size, bool literals,
                 std::string& out) {
  ZSTD_CCtx_reset(probe, ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(probe, ZSTD_c_compressionLevel, level);
  PlaneLayout whole{data, size, size, 1, 1u};
  if (literals && !UseLiteralPlanes(probe, whole)) return size;
  const size_t n = ZSTD_compress2(probe, out.data(), out.size(), data, size);
  ZSTD_CCtx_reset(probe, ZSTD_reset_session_and_parameters);
  return ZSTD_isError(n) ? size : n;
}

}  // namespace

void ChooseLiteralPlanes(ZSTD_CCtx_s* probe, int level, PlaneLayout& layout) {
  layout.literal_planes = 0;
  if (!kHaveSequenceProducer || layout.width < 2 || layout.plane_size == 0) return;
  thread_local std::string out;
  out.resize(ZSTD_compressBound(kProbeBytes));
  for (int k = 0; k < layout.width; ++k) {
    const size_t length = std::min(kProbeBytes, layout.plane_size);
    const char* sample = layout.base + k * layout.plane_size + (layout.plane_size - length) / 2;
    const size_t literals = ProbeSize(probe, level, sample, length, true, out);
    const size_t matches = ProbeSize(probe, level, sample, length, false, out);
    if (literals * 100 <= matches * 101) layout.literal_planes |= 1u << k;
  }
}

bool UseLiteralPlanes(ZSTD_CCtx_s* cctx, const PlaneLayout& layout) {
#if ZSTD_VERSION_NUMBER >= 10504
  if (layout.literal_planes == 0) return true;
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_enableLongDistanceMatching, ZSTD_ps_disable);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_enableSeqProducerFallback, 1);
  ZSTD_registerSequenceProducer(cctx, const_cast<PlaneLayout*>(&layout), ProduceSequences);
  return true;
#else
  (void)cctx;
  (void)layout;
  return false;
#endif
}

}  // namespace sg
