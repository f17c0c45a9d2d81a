// Reading snapshots back (DESIGN §5 "atomic restore"): find the newest
// committed snapshot, fetch its frames with parallel ranged reads, decode them
// in parallel, check every SHA-256, and move the result into place only when
// all of it is good. A snapshot that fails its checks is reported by name and
// the previous one is tried.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/manifest.h"
#include "agent/snapshot_writer.h"
#include "common/object_store.h"

namespace sg {

class SnapshotCatalog {
 public:
  SnapshotCatalog(ObjectStore& store, std::string job);

  // Committed snapshots (those with a manifest), newest first, by listing.
  StatusOr<std::vector<uint64_t>> Committed();
  // The seq `latest` names, if it is set and its manifest exists and no newer
  // manifest follows it; nullopt otherwise. Only a hint (for status and
  // tools): restore goes by Committed(), since `latest` can lag by more than
  // one seq when an abandoned seq lies between it and the newest manifest.
  StatusOr<std::optional<uint64_t>> LatestHint();
  StatusOr<Manifest> ReadManifest(uint64_t seq);

 private:
  ObjectStore& store_;
  const std::string job_;
};

struct RestoreOptions {
  int parallel_reads = 8;  // ranged reads (each decoded by its own task) in flight
  // Called when a snapshot's download starts (again for each fallback).
  std::function<void(const Manifest&)> on_start;
};

struct RestoreResult {
  uint64_t seq = 0;
  std::string dir;          // where the checkpoint now is
  std::string resume_path;  // dir + "/" + manifest.resume (or dir)
  uint64_t bytes = 0;
  std::vector<std::string> rejected;  // "0000000007: <why>" for snapshots that failed
};

class Restorer {
 public:
  Restorer(ObjectStore& store, RestoreOptions options);

  // Restores into `target_dir`, replacing what is there only once the whole
  // snapshot is downloaded and verified. With `seq`, exactly that snapshot;
  // without, the newest good one. NotFound (exit 3) when there is none.
  StatusOr<RestoreResult> Restore(const std::string& job, const std::string& target_dir,
                                  std::optional<uint64_t> seq, const ProgressFn& progress = {});

  // Downloads every file of the snapshot and checks sizes and SHA-256s;
  // writes nothing. The error names every bad file.
  Status Verify(const std::string& job, const Manifest& manifest, const ProgressFn& progress = {});

 private:
  // Streams one file's raw bytes, in order, to `sink`, and checks them.
  Status ReadFile(const std::string& job, const ManifestFile& file,
                  const std::function<Status(std::string_view)>& sink,
                  const std::function<void(uint64_t)>& progress);
  Status RestoreInto(const std::string& job, const Manifest& manifest, const std::string& dir,
                     const ProgressFn& progress);
  StatusOr<RestoreResult> RestoreOne(const std::string& job, uint64_t seq,
                                     const std::string& target_dir, const ProgressFn& progress);

  ObjectStore& store_;
  const RestoreOptions options_;
};

}  // namespace sg
