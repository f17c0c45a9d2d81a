// Reading a snapshot's files back (docs/design.md §7, docs/format.md "Checks
// on restore"): the ranged reads of all files share one pool of workers; each
// worker fetches a range, decodes its frames one at a time into a buffer it
// reuses, checks them and writes each at its place in the file. Restore
// (agent/repo/restorer.h) writes what it reads; `verify` reads the same way and
// writes nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/repo/manifest.h"
#include "agent/repo/snapshot_writer.h"
#include "common/object_store.h"

namespace sg {

// Where one file's bytes go. Frames arrive in any order, from several
// threads at once.
class FileSink {
 public:
  virtual ~FileSink() = default;
  // Writes `raw` at `offset` of the file (pwrite: safe from several threads).
  virtual Status WriteAt(uint64_t offset, std::string_view raw) = 0;
  // Reads back `length` bytes at `offset` into `out`: a file whose manifest
  // has no frame digests (format 1) is hashed from what was written.
  virtual Status ReadAt(uint64_t offset, uint64_t length, std::string* out) = 0;
  // After the last write, once the file's bytes are checked.
  virtual Status Finish() = 0;
};

// A sink for `file`; a null function (verify) drops the bytes.
using OpenFileSink = std::function<StatusOr<std::unique_ptr<FileSink>>(const ManifestFile& file)>;

// A damaged or incomplete snapshot (a bad manifest, a missing or short
// object, a frame or SHA-256 that does not check): the previous one may be
// good. Anything else (network, permissions, a full disk) would fail it too.
bool IsDamage(const Status& st);

// Consecutive frames of one file, stored back to back in one object, fetched
// with one ranged read.
struct ReadRange {
  size_t first_frame = 0;
  size_t end_frame = 0;  // one past the last
  std::string key;       // the object, relative to "<job>/"
  uint64_t offset = 0;   // in the stored object
  uint64_t stored = 0;   // bytes to fetch
  uint64_t raw = 0;      // bytes they decode into
};

// The ranges `file` is read in: consecutive frames that lie back to back in
// the same object go together while their stored bytes stay within
// `max_bytes` and their raw bytes within `max_raw` (a range holds at least
// one frame; `max_raw` 0 means `max_bytes`). Bounding the raw bytes keeps
// the requests of data that compresses very well reasonable: 8 MiB of stored
// zeros is a thousand frames (docs/format.md, "Memory").
std::vector<ReadRange> PlanReadRanges(const ManifestFile& file, uint64_t max_bytes,
                                      uint64_t max_raw = 0);

// Stored bytes per ranged read of `file`: larger for large files (fewer
// requests), 8 MiB for the rest.
uint64_t ReadRangeBytes(const ManifestFile& file);

// Whether every frame of `file` carries the SHA-256 of its raw bytes
// (format 2): its frames are then checked one by one, in parallel, and the
// whole-file SHA-256 is not needed.
bool HasFrameDigests(const ManifestFile& file);

// Workers a restore uses by default: two per core, at least 4 and at most 8.
// Each decodes, hashes and writes what it fetched, so on a small machine more
// workers only contend for the cores and for each file's write lock (bench
// section 3: on 2 cores, 4 workers restored 4 GiB in 7.5 s, 8 in 8.7 s).
int DefaultParallelReads();

class SnapshotFileReader {
 public:
  // `parallel_reads`: workers, each with one ranged read in flight (over all
  // files: this is the one bound on requests and on memory). Once `cancel`
  // (when given) is set, no range starts and the reads in flight end at
  // their next piece, or while they wait for one (BodySink): Read and
  // Verify return Cancelled.
  SnapshotFileReader(ObjectStore& store, std::string job,
                     int parallel_reads = DefaultParallelReads(),
                     const std::atomic<bool>* cancel = nullptr);

  // Reads every file of `manifest` into the sink `open` gives it (called
  // when the file's first range starts; a few files are open at once),
  // reporting the raw bytes done so far to `progress` (from several
  // threads, one at a time). Stops at the first error.
  Status Read(const Manifest& manifest, const OpenFileSink& open, const ProgressFn& progress = {});

  // Read without writing: every file is read and checked, and the error
  // names every damaged file.
  Status Verify(const Manifest& manifest, const ProgressFn& progress = {});

  // The objects (relative to "<job>/") that the last Read or Verify found
  // damaged, sorted: to quarantine (agent/repo/quarantine.h).
  const std::vector<std::string>& damaged_objects() const { return damaged_objects_; }

 private:
  Status ReadAll(const Manifest& manifest, const OpenFileSink& open, bool name_every_damaged_file,
                 const ProgressFn& progress);

  ObjectStore& store_;
  const std::string job_;
  const int parallel_reads_;
  const std::atomic<bool>* const cancel_;
  std::vector<std::string> damaged_objects_;
};

}  // namespace sg
