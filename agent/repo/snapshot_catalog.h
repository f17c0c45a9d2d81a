// A job's history: the committed snapshots that the fences admit
// (docs/design.md §6, agent/repo/fencing.h). A manifest that a fenced writer
// landed late is not part of it, whatever its seq. Everything that reads the
// history (restore, fallback, `verify`, `ls`, `status`, retention, the fence
// a new lease holder draws) reads it through SnapshotCatalog.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/repo/fencing.h"
#include "agent/repo/manifest.h"
#include "common/object_store.h"

namespace sg {

// The history as one listing found it, newest first, with every manifest
// read: what restore, fallback and `ls` need without listing again.
struct SnapshotHistory {
  std::string job;
  struct Entry {
    uint64_t seq = 0;
    StatusOr<Manifest> manifest;  // an error when it could not be read or parsed
  };
  std::vector<Entry> entries;    // committed and admitted, newest first
  std::vector<uint64_t> fenced;  // committed but fenced off: not part of it
  // Admitted snapshots marked suspect (agent/run/suspect.h), newest first: the
  // trainer could not resume from them. Still in `entries`.
  std::vector<uint64_t> suspect;
  // The job's quarantined objects (agent/repo/quarantine.h), relative to
  // "<job>/": a snapshot that references one is never restored without a
  // seq. Read by History() beside the snapshots.
  std::set<std::string> quarantined;

  bool empty() const { return entries.empty(); }
  bool IsSuspect(uint64_t seq) const;
  // The readable manifests, newest first.
  std::vector<Manifest> Readable() const;
  // The manifest of `seq` when it is in the history and readable.
  const Manifest* Find(uint64_t seq) const;
};

class SnapshotCatalog {
 public:
  SnapshotCatalog(ObjectStore& store, std::string job);

  // Committed snapshots (those with a manifest) that the fences admit, newest
  // first: one LIST of the fences, one of the snapshots. Reads the manifests
  // it needs to judge (only those above the lowest fence), and keeps them for
  // ReadManifest.
  StatusOr<std::vector<uint64_t>> Committed();
  // Committed(), and the job's quarantined objects (agent/repo/quarantine.h)
  // into `quarantined`, listed at the same time: what the writer's index
  // (after its claim) and History() read.
  StatusOr<std::vector<uint64_t>> CommittedAndQuarantined(std::set<std::string>& quarantined);
  // The same from a listing of SnapshotsPrefix(job) that the caller already
  // has (retention lists every object of the snapshots anyway).
  StatusOr<std::vector<uint64_t>> CommittedIn(const std::vector<ObjectInfo>& snapshot_objects);
  // Committed() with every admitted manifest read and the quarantine list
  // (a LIST of its own, at the same time): one listing for restore and its
  // fallbacks, `ls`, `status` and the agent's start.
  StatusOr<SnapshotHistory> History();
  // Seqs with a manifest that the last Committed() left out as fenced.
  const std::vector<uint64_t>& Fenced() const { return fenced_; }
  // Seqs that the last Committed() admitted and that carry a suspect mark.
  const std::vector<uint64_t>& Suspect() const { return suspect_; }
  // One GET (none when Committed() or Prefetch already read it).
  StatusOr<Manifest> ReadManifest(uint64_t seq);
  // Reads the manifests of `seqs` not read yet, up to `parallel` GETs at a
  // time, and keeps those that parse for ReadManifest; one that fails is
  // read again by ReadManifest, which reports why.
  void Prefetch(const std::vector<uint64_t>& seqs, int parallel = kParallelReads);
  static constexpr int kParallelReads = 8;

 private:
  std::vector<uint64_t> Admitted(const FenceTable& fences,
                                 const std::vector<ObjectInfo>& snapshot_objects);

  ObjectStore& store_;
  const std::string job_;
  std::map<uint64_t, Manifest> read_;
  std::vector<uint64_t> fenced_;
  std::vector<uint64_t> suspect_;
};

}  // namespace sg
