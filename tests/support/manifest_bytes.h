// Whether raw bytes are what a manifest's file entry lists: frame by frame
// against each frame's SHA-256 (format 3 has no whole-file digest), and
// against the file's own SHA-256 where the manifest gives one (formats 1
// and 2).
#pragma once

#include <string_view>

#include "agent/repo/manifest.h"
#include "common/crypto.h"

namespace sg::testing {

inline bool HoldsManifestBytes(std::string_view raw, const ManifestFile& f) {
  if (raw.size() != f.size) return false;
  if (!f.sha256.empty() && Sha256Hex(raw) != f.sha256) return false;
  for (size_t i = 0; i < f.frames.size(); ++i) {
    if (f.frames[i].sha256.empty()) continue;  // format 1: the file's digest above
    if (Sha256Hex(raw.substr(i * f.frame_size, f.FrameRawSize(i))) != f.frames[i].sha256) {
      return false;
    }
  }
  return !f.sha256.empty() || !f.frames.empty() || raw.empty();
}

}  // namespace sg::testing
