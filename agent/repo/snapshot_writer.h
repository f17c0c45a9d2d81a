// Turns a captured checkpoint (agent/detect/capture.h) into a committed snapshot
// (docs/design.md §4, §5): claim a seq that no other writer can take, upload every file as
// independent zstd frames (read, compress and upload overlap), then the
// manifest with a create-only write, then `latest`. A crash at any point
// leaves the previous snapshot restorable; gc removes the leftovers.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "agent/detect/capture.h"
#include "agent/repo/claim_keeper.h"
#include "agent/repo/frame_index.h"
#include "agent/repo/manifest.h"
#include "common/clock.h"
#include "common/object_store.h"
#include "common/zstd_codec.h"

namespace sg {

// What the manifest says besides the files; its step and resume come from
// the captured checkpoint.
struct SnapshotRequest {
  std::string job;
  std::string preset;
  uint64_t generation = 0;
  std::string instance;
  std::optional<int64_t> index, attempt;  // the engine's (agent/config/engine_identity.h)
  // Runs after every object is uploaded and the capture is verified, before
  // the manifest (the agent renews its lease here): an error commits nothing.
  std::function<Status()> verify_before_commit;
  // Set from another thread to give up (a notice pre-empts a periodic
  // upload); the snapshot then fails with Cancelled and commits nothing.
  const std::atomic<bool>* cancel = nullptr;
};

struct SnapshotOptions {
  int level = 1;
  int threads = 0;  // compression threads; 0 = all cores
  ShufflePolicy shuffle = ShufflePolicy::kAuto;
  int files_in_flight = 4;  // small files (or packs of them) uploaded at once
  // When a snapshot has at least pack_min_files files of at most
  // pack_file_max bytes (not empty), they go into shared pack objects of up
  // to pack_bytes raw bytes each (docs/format.md, "Packs"); a few small
  // files keep objects of their own.
  uint64_t pack_file_max = 1ull << 20;
  uint64_t pack_bytes = 8ull << 20;
  size_t pack_min_files = 16;
  // Reference frames already stored for the job instead of uploading them
  // again (config key `reuse`; docs/design.md §4, "Frame reuse").
  bool reuse = true;
  // How the claim is kept alive while the snapshot is written
  // (docs/design.md §4, "Live writers").
  ClaimTiming claim;
};

// A seq taken by ClaimSeq: its claim's ETag, and when its write was sent.
struct ClaimedSeq {
  uint64_t seq = 0;
  std::string etag;
  Clock::MonoTime sent;
};

struct SnapshotResult {
  uint64_t seq = 0;
  uint64_t bytes = 0;
  uint64_t stored_bytes = 0;  // of all its frames
  uint64_t new_bytes = 0;     // of the frames this snapshot uploaded
  uint64_t reused_bytes = 0;  // of the frames it references in earlier objects
  Manifest manifest;
};

// Called with the raw bytes read so far, for progress display.
using ProgressFn = std::function<void(uint64_t bytes)>;

class SnapshotWriter {
 public:
  SnapshotWriter(ObjectStore& store, Clock& clock, SnapshotOptions options);

  // Uploads the files of `capture` and commits them. A file whose identity
  // (agent/detect/capture.h) is not the captured one when it is opened, after it is
  // read, or before the commit (CapturedCheckpoint::Verify) fails the
  // snapshot with FileChanged; nothing is committed then.
  StatusOr<SnapshotResult> Write(const CapturedCheckpoint& capture, const SnapshotRequest& request,
                                 const ProgressFn& progress = {});

  // Takes the next free seq above those in `objects` (a listing of the
  // job's snapshots) with a create-only claim object.
  StatusOr<ClaimedSeq> ClaimSeq(const std::string& job, const std::string& claim_body,
                                const std::vector<ObjectInfo>& objects);

 private:
  StatusOr<SnapshotResult> UploadAndCommit(const CapturedCheckpoint& capture,
                                           const SnapshotRequest& request, Manifest manifest,
                                           const ProgressFn& progress);
  // Uploads every file of `sources` into `files` (one entry per source):
  // small ones in packs, or several at once, the others one at a time
  // (agent/repo/snapshot_writer_commit.cc).
  Status UploadFiles(const std::string& job, uint64_t seq, const std::vector<CapturedFile>& sources,
                     std::vector<ManifestFile>& files, const ProgressFn& report);
  StatusOr<ManifestFile> UploadFile(const std::string& job, uint64_t seq,
                                    const CapturedFile& source, const ProgressFn& progress);
  // Uploads `sources` as pack number `number` of snapshot `seq`: one object,
  // each file one zstd frame in it, into `out` (one entry per source).
  Status UploadPack(const std::string& job, uint64_t seq, int number,
                    const std::vector<const CapturedFile*>& sources, std::vector<ManifestFile*> out,
                    const ProgressFn& progress);

  // Reads the manifests `before` (of the listing the claim was chosen
  // from), and once `claimed` is ready (the seq this writer claimed; 0: the
  // claim failed), lists the history again and puts the manifests of that
  // listing below that seq into `index`, without the frames of quarantined
  // objects, listed beside it (docs/design.md §4, "Frame reuse" and
  // "Quarantine").
  Status BuildIndex(const std::string& job, const std::vector<uint64_t>& before,
                    std::shared_future<uint64_t> claimed, FrameIndex& index);

  ObjectStore& store_;
  Clock& clock_;
  const SnapshotOptions options_;
  const int threads_;
  const std::atomic<bool>* cancel_ = nullptr;  // of the Write in progress
  FrameIndex* index_ = nullptr;                // of the Write in progress; null: no reuse
  ClaimKeeper* claim_ = nullptr;               // of the Write in progress
};

}  // namespace sg
