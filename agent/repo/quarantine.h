// Quarantine of damaged objects (docs/design.md §4, "Quarantine"). When a
// restore or `verify` finds a data object damaged (a frame whose digest does
// not match or that does not decode, an object shorter than its frames, or
// one that is gone), its key goes into the job's quarantine list in the
// store: one create-only object per key under "<job>/quarantine/"
// (agent/repo/store_layout.h), so agents never race on a shared list. Then
// the writer offers no frame of it for reuse (the next snapshot uploads
// those frames afresh), restore without a seq and `run`'s start pass over
// every snapshot that references it, retention does not count such a
// snapshot as a good one, and `verify` and `status` name it.
//
// A missing object counts as damaged: gc never deletes an object that a
// kept manifest references, so a reader meets a missing one only when it
// was lost, or when the snapshot it reads was retired meanwhile (nothing
// kept needs the object then, and its entry is harmless). A transient
// error, a refusal or a cancel never quarantines anything.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/repo/manifest.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/snapshot_file_reader.h"
#include "common/object_store.h"

namespace sg {

// The body of a quarantine object (docs/format.md, "Quarantine").
struct QuarantineRecord {
  std::string key;       // the damaged object, relative to "<job>/"
  std::string time;      // UTC, when it was found
  std::string host;      // the host name of the agent or command that found it
  std::string found_by;  // "restore" or "verify"
  uint64_t seq = 0;      // the snapshot whose read found it
  std::string why;       // what the read said

  nlohmann::ordered_json ToJson() const;
};

// The job's quarantined keys (relative to "<job>/"): one LIST, no GET.
StatusOr<std::set<std::string>> ReadQuarantine(ObjectStore& store, const std::string& job);

// Quarantines each of `keys`, found damaged by a read of snapshot `seq`:
// one create-only PUT each; an entry already there stays (the first finder's
// account). Best effort: a write the store refuses (a read-only role) is
// logged, and the caller goes on as it would have without it.
void QuarantineObjects(ObjectStore& store, const std::string& job,
                       const std::vector<std::string>& keys, std::string_view found_by,
                       uint64_t seq, const std::string& why);

// After a read of snapshot `seq` by `reader` that ended with `st`: when `st`
// is damage (IsDamage), quarantines the objects the reader found damaged
// (QuarantineObjects) and returns them; otherwise none.
std::vector<std::string> QuarantineDamaged(ObjectStore& store, const std::string& job,
                                           const SnapshotFileReader& reader, const Status& st,
                                           std::string_view found_by, uint64_t seq);

// The keys of `quarantined` that `m` references, sorted.
std::vector<std::string> QuarantinedReferences(const Manifest& m,
                                               const std::set<std::string>& quarantined);

// The seqs of `seqs` whose manifest references a key of `quarantined`,
// read through `catalog`, several at a time (no read when `quarantined` is
// empty). One whose manifest cannot be read is left out: it is not a good
// snapshot anyway.
std::set<uint64_t> SnapshotsNeeding(SnapshotCatalog& catalog, const std::vector<uint64_t>& seqs,
                                    const std::set<std::string>& quarantined);

// Removes the quarantine entries of `keys` (relative to "<job>/"), whose
// objects are gone: an entry outlives its object only until the gc that
// finds it so.
Status ForgetQuarantined(ObjectStore& store, const std::string& job,
                         const std::vector<std::string>& keys);

// `history` without the snapshots that reference a quarantined object,
// each named in the log: what a local checkpoint is compared with at
// `run`'s start (docs/design.md §8), since the store holds no good copy of them.
SnapshotHistory WithoutQuarantined(const SnapshotHistory& history);

}  // namespace sg
