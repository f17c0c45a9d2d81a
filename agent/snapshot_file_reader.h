// Reading a snapshot's files back (docs/design.md §7, docs/format.md "Checks
// on restore"): each file's frames are fetched with parallel ranged reads,
// decoded in parallel, and its size and SHA-256 checked. Restore
// (agent/restorer.h) writes what it reads; `verify` reads the same way and
// writes nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/manifest.h"
#include "agent/snapshot_writer.h"
#include "common/object_store.h"

namespace sg {

// Where one file's bytes go, in order, as they are read and decoded.
class FileSink {
 public:
  virtual ~FileSink() = default;
  virtual Status Append(std::string_view raw) = 0;
  // After the last Append, once the file's size and SHA-256 are checked.
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
// the same object go together while both their stored and their raw bytes
// stay within `max_bytes` (a range holds at least one frame). Bounding the raw bytes too keeps memory bounded for data that
// compresses well: 8 MiB of stored zeros would otherwise decode into
// gigabytes held by one read (docs/format.md, "Memory").
std::vector<ReadRange> PlanReadRanges(const ManifestFile& file, uint64_t max_bytes);

class SnapshotFileReader {
 public:
  // `parallel_reads`: ranged reads (each decoded by its own task) in flight.
  SnapshotFileReader(ObjectStore& store, std::string job, int parallel_reads = 8);

  // Reads every file of `manifest` into the sink `open` gives it, reporting
  // the raw bytes done so far to `progress` (from several threads, one at a
  // time). Stops at the first error.
  Status Read(const Manifest& manifest, const OpenFileSink& open, const ProgressFn& progress = {});

  // Read without writing: every file is read and checked, and the error
  // names every damaged file.
  Status Verify(const Manifest& manifest, const ProgressFn& progress = {});

 private:
  Status ReadAll(const Manifest& manifest, const OpenFileSink& open, bool name_every_damaged_file,
                 const ProgressFn& progress);
  // Streams one file's raw bytes, in order, to `sink`, and checks them.
  Status ReadFile(const ManifestFile& file, FileSink* sink,
                  const std::function<void(uint64_t)>& progress);

  ObjectStore& store_;
  const std::string job_;
  const int parallel_reads_;
};

}  // namespace sg
