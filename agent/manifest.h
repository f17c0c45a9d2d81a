// The snapshot manifest (format "spotguard-snapshot/1"), which
// docs/format.md describes. Its keys are agent/store_layout.h's.
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

inline constexpr std::string_view kManifestFormat = "spotguard-snapshot/1";
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

  bool operator==(const FrameRef&) const = default;
};

struct ManifestFile {
  std::string path;  // relative to the checkpoint dir
  uint64_t size = 0;
  uint32_t mode = 0644;
  std::string sha256;  // hex, of the raw bytes
  std::string key;     // the file's own object, relative to "<job>/"
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
  std::string job;
  uint64_t seq = 0;
  uint64_t generation = 0;
  std::string created;  // UTC, ISO 8601
  std::string instance;
  // The engine's child index and attempt of the writer (agent/engine_identity.h);
  // written only when set.
  std::optional<int64_t> index;
  std::optional<int64_t> attempt;
  std::string preset;
  std::optional<int64_t> step;
  std::string resume;  // relative path, "" = the directory itself
  std::vector<ManifestFile> files;

  uint64_t TotalSize() const;
  uint64_t TotalStored() const;
};

// A path a manifest may name: relative, no empty, "." or ".." segment, no
// NUL, not longer than 4096 bytes. Says what is wrong otherwise.
Status CheckRelativePath(std::string_view path);

nlohmann::ordered_json ManifestToJson(const Manifest& m);
// Parses and checks a manifest: the format, that it is the snapshot `seq` of
// `job`, every path (see CheckRelativePath; no duplicates, no file inside
// another), keys inside the snapshot, frame counts and sizes that add up.
StatusOr<Manifest> ParseManifest(std::string_view text, const std::string& job, uint64_t seq);

}  // namespace sg
