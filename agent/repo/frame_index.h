// Frames already stored for a job, found by codec and the SHA-256 of their
// raw bytes (docs/design.md §4, "Frame reuse"): the snapshot writer
// references such a frame instead of uploading it again. Built from the
// manifests alone; it never reads a stored object.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "agent/repo/manifest.h"
#include "common/zstd_codec.h"

namespace sg {

class FrameIndex {
 public:
  // Ready at once; or, with `pending`, Find waits until MarkReady: the
  // writer reads the history while the first frames are read and compressed.
  FrameIndex() = default;
  explicit FrameIndex(bool pending) : ready_(!pending) {}
  // Ends the wait of Find. Not `usable` (the history could not be read):
  // Find then finds nothing.
  void MarkReady(bool usable);
  // Every frame of `m` that carries its digest (format 2) and was cut at
  // kFrameSize: only such frames decode to the same raw slice elsewhere.
  // None that lives in an object of `quarantined` (keys relative to
  // "<job>/", agent/repo/quarantine.h): a damaged object is never referenced
  // again, its frames are stored afresh.
  void AddManifest(const Manifest& m, const std::set<std::string>& quarantined = {});
  // Remembers a frame just stored (thread-safe); the first one stays.
  void Add(Codec codec, const FrameRef& frame);
  // The stored frame of `codec` whose raw bytes have `sha256`, if any
  // (thread-safe; waits until the index is ready).
  std::optional<FrameRef> Find(Codec codec, const std::string& sha256) const;
  // Whether Find answers at once (the history was read, or there is none to read).
  bool ready() const;
  size_t size() const;

 private:
  static std::string Key(Codec codec, const std::string& sha256);

  mutable std::mutex mu_;
  mutable std::condition_variable ready_cv_;
  bool ready_ = true;
  bool usable_ = true;
  std::unordered_map<std::string, FrameRef> frames_;
};

}  // namespace sg
