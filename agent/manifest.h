// The snapshot manifest (format "spotguard-snapshot/1") and the store layout
// of docs/design.md §4. docs/format.md is the human description of both.
//
//   <job>/snapshots/<seq>/claim            seq taken by a writer (create-only)
//   <job>/snapshots/<seq>/files/<path>.zst the file's frames
//   <job>/snapshots/<seq>/manifest.json    written last: its presence commits
//   <job>/latest                           newest committed seq (a hint)
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

struct ManifestFile {
  std::string path;  // relative to the checkpoint dir
  uint64_t size = 0;
  uint32_t mode = 0644;
  std::string sha256;  // hex, of the raw bytes
  std::string key;     // object key relative to "<job>/"
  uint64_t stored_size = 0;
  Codec codec = Codec::kZstd;
  uint64_t frame_size = kFrameSize;
  std::vector<uint64_t> frames;  // stored size of each frame, in order

  // Raw bytes that frame `i` decodes to.
  uint64_t FrameRawSize(size_t i) const;
};

struct Manifest {
  std::string job;
  uint64_t seq = 0;
  uint64_t generation = 0;
  std::string created;  // UTC, ISO 8601
  std::string instance;
  std::string preset;
  std::optional<int64_t> step;
  std::string resume;  // relative path, "" = the directory itself
  std::vector<ManifestFile> files;

  uint64_t TotalSize() const;
  uint64_t TotalStored() const;
};

// "0000000042": ten digits, so that name order is numeric order.
std::string SeqName(uint64_t seq);
std::optional<uint64_t> ParseSeqName(std::string_view name);

std::string JobPrefix(const std::string& job);                     // "<job>/"
std::string SnapshotsPrefix(const std::string& job);               // "<job>/snapshots/"
std::string SnapshotPrefix(const std::string& job, uint64_t seq);  // ".../<seq>/"
std::string ManifestKey(const std::string& job, uint64_t seq);
std::string ClaimKey(const std::string& job, uint64_t seq);
std::string LatestKey(const std::string& job);
// Key of a file's object, relative to the job prefix.
std::string FileObjectKey(uint64_t seq, const std::string& path, Codec codec);

// A path a manifest may name: relative, no empty, "." or ".." segment, no
// NUL, not longer than 4096 bytes. Says what is wrong otherwise.
Status CheckRelativePath(std::string_view path);

nlohmann::ordered_json ManifestToJson(const Manifest& m);
// Parses and checks a manifest: the format, that it is the snapshot `seq` of
// `job`, every path (see CheckRelativePath; no duplicates, no file inside
// another), keys inside the snapshot, frame counts and sizes that add up.
StatusOr<Manifest> ParseManifest(std::string_view text, const std::string& job, uint64_t seq);

}  // namespace sg
