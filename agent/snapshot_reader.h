// Reading snapshots back (docs/design.md §7): find the newest
// committed snapshot, fetch its frames with parallel ranged reads, decode them
// in parallel, check every SHA-256, and move the result into place only when
// all of it is good. A snapshot that fails its checks is reported by name and
// the previous one is tried.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/manifest.h"
#include "agent/snapshot_writer.h"
#include "common/object_store.h"

namespace sg {

// The job's history: committed snapshots that the fences admit
// (agent/fencing.h). A manifest that a fenced writer landed late is not part
// of it, whatever its seq.
class SnapshotCatalog {
 public:
  SnapshotCatalog(ObjectStore& store, std::string job);

  // Committed snapshots (those with a manifest) that the fences admit, newest
  // first, by listing. Reads the manifests it needs to judge (only those
  // above the lowest fence), and keeps them for ReadManifest.
  StatusOr<std::vector<uint64_t>> Committed();
  // Seqs with a manifest that the last Committed() left out as fenced.
  const std::vector<uint64_t>& Fenced() const { return fenced_; }
  StatusOr<Manifest> ReadManifest(uint64_t seq);

 private:
  ObjectStore& store_;
  const std::string job_;
  std::map<uint64_t, Manifest> read_;
  std::vector<uint64_t> fenced_;
};

struct RestoreOptions {
  int parallel_reads = 8;  // ranged reads (each decoded by its own task) in flight
  // Whether a file of the target that restore did not put there may be
  // replaced by the snapshot's file of the same path (it is then kept in a
  // backup dir beside the target). Without, such a restore fails before
  // downloading anything, with reason "ForeignFiles". Other foreign files
  // are always kept in place.
  bool replace_foreign = false;
  // Called when a snapshot's download starts (again for each fallback).
  std::function<void(const Manifest&)> on_start;
};

struct RestoreResult {
  uint64_t seq = 0;
  std::string dir;          // where the checkpoint now is
  std::string resume_path;  // dir + "/" + manifest.resume (or dir)
  uint64_t bytes = 0;
  std::vector<std::string> rejected;  // "0000000007: <why>" for snapshots that failed
  uint64_t kept_foreign = 0;          // entries restore did not own, kept in place
  std::vector<std::string> replaced;  // foreign paths the snapshot replaced
  std::string backup_dir;             // where those are now; "" when none
};

class Restorer {
 public:
  Restorer(ObjectStore& store, RestoreOptions options);

  // Restores into `target_dir` once the whole snapshot is downloaded and
  // verified, keeping every file there that restore did not put there
  // (agent/restore_placement.h). With `seq`, exactly that snapshot;
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
