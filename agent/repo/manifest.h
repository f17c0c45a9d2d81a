// The snapshot manifest, which docs/format.md describes: format
// "spotguard-snapshot/3" (every frame a reference with its raw SHA-256 and
// XXH3-128, no whole-file digest) is written; "spotguard-snapshot/2" (the
// same, plus each file's SHA-256) and "spotguard-snapshot/1" (a file's frames
// back to back in its own object) are still read. Its keys are
// agent/repo/store_layout.h's.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/zstd_codec.h"

namespace sg {

inline constexpr std::string_view kManifestFormat1 = "spotguard-snapshot/1";
inline constexpr std::string_view kManifestFormat2 = "spotguard-snapshot/2";
inline constexpr std::string_view kManifestFormat3 = "spotguard-snapshot/3";
// Raw bytes per frame. Frames are compressed and decompressed independently,
// so restore decodes them in parallel; 8 MiB also matches S3's part size.
inline constexpr uint64_t kFrameSize = 8ull << 20;

// Where one frame of a file is stored. Format 1 keeps a file's frames back to
// back in the file's own object (`ManifestFile::key`); readers go through
// these references only, so a frame may also live in another object (a pack,
// or an earlier snapshot's object) at any offset.
struct FrameRef {
  std::string key;      // the object holding the frame, relative to "<job>/"
  uint64_t offset = 0;  // of the frame's stored bytes in that object
  uint64_t stored = 0;  // stored bytes of the frame
  std::string sha256;   // hex, of the frame's raw bytes; empty in format 1
  // XXH3-128 of the frame's raw bytes (hex); empty when the manifest does not
  // give it (format 1, and format 2 written before it was added): restore
  // then checks sha256 instead (docs/format.md, "Frame digests").
  std::string xxh3;

  bool operator==(const FrameRef&) const = default;
};

struct ManifestFile {
  std::string path;  // relative to the checkpoint dir
  uint64_t size = 0;
  uint32_t mode = 0644;
  // Hex, of the raw bytes: formats 1 and 2 only. Format 3 has none; its
  // frames' digests cover the file, each frame_size raw bytes in order.
  std::string sha256;
  std::string key;  // the file's own object, relative to "<job>/"
  uint64_t stored_size = 0;
  Codec codec = Codec::kZstd;
  uint64_t frame_size = kFrameSize;
  std::vector<FrameRef> frames;  // in order

  // Raw bytes that frame `i` decodes to.
  uint64_t FrameRawSize(size_t i) const;
  // Appends a frame of `stored` bytes right after the previous one in `key`
  // (the format 1 layout) and counts it in stored_size.
  void AppendOwnFrame(uint64_t stored, std::string sha256 = {});
};

struct Manifest {
  int format = 3;  // 1, 2 or 3: the format it was read in; written as is
  std::string job;
  uint64_t seq = 0;
  uint64_t generation = 0;
  std::string created;  // UTC, ISO 8601
  std::string instance;
  // The engine's child index and attempt of the writer (agent/config/engine_identity.h);
  // written only when set.
  std::optional<int64_t> index;
  std::optional<int64_t> attempt;
  std::string preset;
  std::optional<int64_t> step;
  std::string resume;  // relative path, "" = the directory itself
  std::vector<ManifestFile> files;

  uint64_t TotalSize() const;
  uint64_t TotalStored() const;
  // Stored bytes that this snapshot uploaded (each frame of its own objects
  // once), and the rest of TotalStored(): frames it references in earlier
  // snapshots' objects, or a second time.
  uint64_t NewStored() const;
  uint64_t ReusedStored() const;
  // Every object the snapshot needs (relative to "<job>/"), sorted.
  std::vector<std::string> ReferencedKeys() const;
};

// A path a manifest may name: relative, no empty, "." or ".." segment, no
// NUL, not longer than 4096 bytes. Says what is wrong otherwise.
Status CheckRelativePath(std::string_view path);

// In format m.format (format 1 can only say frames that lie back to back in
// the file's own object; the writer always writes format 3).
nlohmann::ordered_json ManifestToJson(const Manifest& m);
// Parses and checks a manifest: the format (1, 2 or 3), that it is the snapshot
// `seq` of `job`, every path (see CheckRelativePath; no duplicates, no file
// inside another), the file keys inside the snapshot, every frame key inside
// the job's snapshots no later than `seq`, frame counts, offsets and sizes
// that add up, and (formats 2 and 3) every frame's SHA-256.
StatusOr<Manifest> ParseManifest(std::string_view text, const std::string& job, uint64_t seq);

}  // namespace sg
