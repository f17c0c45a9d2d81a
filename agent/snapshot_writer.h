// Turns a set of files into a committed snapshot (docs/design.md §4,
// §5): claim a seq that no other writer can take, upload every file as
// independent zstd frames (read, compress and upload overlap), then the
// manifest with a create-only write, then `latest`. A crash at any point
// leaves the previous snapshot restorable; gc removes the leftovers.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/manifest.h"
#include "common/clock.h"
#include "common/object_store.h"
#include "common/zstd_codec.h"

namespace sg {

struct SnapshotSource {
  std::string path;       // relative path recorded in the manifest
  std::string read_from;  // absolute path to read (a staged copy, or the file itself)
};

struct SnapshotRequest {
  std::string job;
  std::vector<SnapshotSource> files;
  std::string preset;
  std::optional<int64_t> step;
  std::string resume;  // relative path; "" = the directory
  uint64_t generation = 0;
  std::string instance;
  // Runs after every object is uploaded and before the manifest: a capture
  // that finds its files changed returns an error and nothing is committed.
  std::function<Status()> verify_before_commit;
  // Set from another thread to give up (a notice pre-empts a periodic
  // upload); the snapshot then fails with Cancelled and commits nothing.
  const std::atomic<bool>* cancel = nullptr;
};

struct SnapshotOptions {
  int level = 1;
  int threads = 0;  // compression threads; 0 = all cores
  ShufflePolicy shuffle = ShufflePolicy::kAuto;
  int files_in_flight = 4;  // small files uploaded at once
};

struct SnapshotResult {
  uint64_t seq = 0;
  uint64_t bytes = 0;
  uint64_t stored_bytes = 0;
  Manifest manifest;
};

// Called with the raw bytes read so far, for progress display.
using ProgressFn = std::function<void(uint64_t bytes)>;

class SnapshotWriter {
 public:
  SnapshotWriter(ObjectStore& store, Clock& clock, SnapshotOptions options);

  // Uploads and commits. A file that changes while it is read (size, mtime
  // or inode differ before and after) fails the snapshot with reason
  // "FileChanged"; nothing is committed then.
  StatusOr<SnapshotResult> Write(const SnapshotRequest& request, const ProgressFn& progress = {});

  // Takes the next free seq with a create-only claim object.
  StatusOr<uint64_t> ClaimSeq(const std::string& job, const std::string& claim_body);

 private:
  StatusOr<SnapshotResult> UploadAndCommit(const SnapshotRequest& request, Manifest manifest,
                                           const ProgressFn& progress);
  StatusOr<ManifestFile> UploadFile(const std::string& job, uint64_t seq,
                                    const SnapshotSource& source, const ProgressFn& progress);

  ObjectStore& store_;
  Clock& clock_;
  const SnapshotOptions options_;
  const int threads_;
  const std::atomic<bool>* cancel_ = nullptr;  // of the Write in progress
};

}  // namespace sg
