// Decoding one read range of a snapshot file (agent/repo/snapshot_file_reader.h)
// as its stored bytes come: each frame is decoded straight from the pieces
// the store hands over (ObjectStore::GetTo), checked against its digests
// and written at its place in the file as soon as its last byte is in. A
// range is never gathered whole (docs/design.md §7, docs/format.md
// "Memory").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "agent/repo/manifest.h"
#include "agent/repo/snapshot_file_reader.h"
#include "common/crypto.h"
#include "common/status.h"
#include "common/zstd_codec.h"

namespace sg {

// Frames are hashed and written this many decoded bytes at a time
// (docs/design.md §7).
inline constexpr size_t kWritePiece = 64u << 10;

class RangeDecoder {
 public:
  struct Target {
    const ManifestFile* file = nullptr;
    const ReadRange* range = nullptr;
    FileSink* sink = nullptr;  // null: decoded and checked, not written (verify)
    // Check each frame's digests (format 2); `thorough` checks every digest
    // the manifest has, and zstd's own checksum (verify).
    bool frame_digests = false;
    bool thorough = false;
    // Hashes the decoded bytes in order (format 1, read in order); a range
    // fed to it cannot start over.
    Sha256Stream* inline_sha = nullptr;
    // Called with a frame's raw size once it is written; once per frame,
    // also when the range starts over.
    std::function<void(uint64_t)> written;
  };

  explicit RangeDecoder(Target target);

  // The next stored bytes of the range, at `offset` from its start: a
  // BodySink (common/body_sink.h). Offset 0 again starts the range over.
  // A frame that does not decode or check fails with Corruption naming the
  // file, the frame and the object; so do bytes past the range's end.
  Status Feed(uint64_t offset, std::string_view bytes);

  // After the last byte: Corruption when the range ended short.
  Status Finish() const;

  // The first error Feed returned (the store returns it too, maybe with
  // its own context).
  const Status& error() const { return error_; }

 private:
  Status FeedFrames(std::string_view bytes);
  Status EndFrame();
  Status Damaged(const std::string& what) const;

  const Target t_;
  FrameStreamDecoder decoder_;
  size_t frame_;          // the frame being fed
  uint64_t in_frame_ = 0;  // its stored bytes fed so far
  uint64_t received_ = 0;  // stored bytes of the range fed so far
  size_t reported_;       // frames before this one have been reported written
  Status error_;
};

}  // namespace sg
