// How a shuffled frame's byte planes go into its zstd frame (common/zstd_codec.cc).
// After byte shuffling, most planes of a float tensor are either near-random
// (low mantissa bytes) or of low entropy with few repeats (exponent bytes):
// zstd's match finder searches them for little or nothing, while its
// Huffman coding of the literals alone gets the same size or better at
// about half the CPU. So each plane of a frame goes one of two ways, decided
// from a probe of the plane: as literals only (an external sequence
// producer that reports no matches) or through zstd's own match finder.
// Both give ordinary zstd blocks in one ordinary zstd frame: any zstd
// decoder, and every spotguard release, reads the result (docs/format.md,
// "Codecs and frames"); nothing in the stored format says which way a block
// went.
#pragma once

#include <cstddef>
#include <cstdint>

struct ZSTD_CCtx_s;

namespace sg {

// The planes of one frame as the sequence producer sees them.
struct PlaneLayout {
  const char* base = nullptr;  // the shuffled frame
  size_t size = 0;             // its length
  size_t plane_size = 0;       // size / width; the tail beyond width planes goes with the last
  int width = 1;
  uint32_t literal_planes = 0;  // bit k: plane k as literals only
};

// Probes each plane of `layout` (a slice from its middle, compressed both
// ways with `probe`, whose parameters this resets) and sets
// `layout.literal_planes` for the planes where literals alone come out at
// most 1% larger than zstd's matches.
void ChooseLiteralPlanes(ZSTD_CCtx_s* probe, int level, PlaneLayout& layout);

// Makes the next compression with `cctx` (parameters already set) code the
// blocks of `layout`'s literal planes as literals only. `layout` must stay
// valid until that compression is done; the next parameter reset of `cctx`
// ends it. False when this libzstd has no sequence producer API (before
// 1.5.4): every plane then goes through the match finder, as before.
bool UseLiteralPlanes(ZSTD_CCtx_s* cctx, const PlaneLayout& layout);

}  // namespace sg
