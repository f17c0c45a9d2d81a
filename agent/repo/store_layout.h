// Every key of a job's prefix in the store, built and parsed here and nowhere
// else (docs/design.md §4; docs/format.md is the human description):
//
//   <job>/snapshots/<seq>/claim            seq taken by a writer (create-only)
//   <job>/snapshots/<seq>/files/<path>.zst the file's frames (<path> for codec none)
//   <job>/snapshots/<seq>/manifest.json    written last: its presence commits
//   <job>/snapshots/<seq>/suspect.json     the trainer could not resume from it (agent/run/suspect.h)
//   <job>/latest                           newest committed seq (a hint)
//   <job>/lease                            the job's lease (agent/repo/lease.h)
//   <job>/fences/<generation>-<seq>        one per lease generation (agent/repo/fencing.h)
//   <job>/quarantine/<key>.json            a damaged data object (agent/repo/quarantine.h)
//   <job>/complete                         written once when the job finished
//   <job>/events/<utc-time>-<kind>.json    the job's event records (agent/ledger/events.h)
//   <job>/logs/<instance>/<generation>-<seq>-<utc-time>.log.zst
//                                          a shipped log segment (agent/logs/log_shipper.h)
//
// <seq> and <generation> are ten-digit decimals, so name order is numeric
// order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/zstd_codec.h"

namespace sg {

// "0000000042": ten digits, so that name order is numeric order.
std::string SeqName(uint64_t seq);
std::optional<uint64_t> ParseSeqName(std::string_view name);

std::string JobPrefix(const std::string& job);                     // "<job>/"
std::string SnapshotsPrefix(const std::string& job);               // "<job>/snapshots/"
std::string SnapshotPrefix(const std::string& job, uint64_t seq);  // ".../<seq>/"
std::string ManifestKey(const std::string& job, uint64_t seq);
std::string ClaimKey(const std::string& job, uint64_t seq);
std::string LatestKey(const std::string& job);
// Where the objects of snapshot `seq`'s files are, relative to the job
// prefix: "snapshots/<seq>/files/".
std::string FileObjectsPrefix(uint64_t seq);
// Key of a file's object, relative to the job prefix.
std::string FileObjectKey(uint64_t seq, const std::string& path, Codec codec);
// Key of a snapshot's pack number `number` (1, 2, ...), relative to the job
// prefix: "snapshots/<seq>/packs/pack-000001.zst".
std::string PackObjectKey(uint64_t seq, int number);
// The seq of the snapshot that wrote a frame-holding object, relative to the
// job prefix: "snapshots/<seq>/files/<...>" or "snapshots/<seq>/packs/<...>";
// nullopt for any other key.
std::optional<uint64_t> SeqOfDataKey(std::string_view key);
// The seq of a key below SnapshotsPrefix(job) ("<job>/snapshots/<seq>/..."),
// if it is one.
std::optional<uint64_t> SnapshotSeqOfKey(const std::string& job, std::string_view key);
// The seq of a key that is a manifest ("<job>/snapshots/<seq>/manifest.json").
std::optional<uint64_t> ManifestSeqOfKey(const std::string& job, std::string_view key);

// "<job>/snapshots/<seq>/suspect.json": the mark of a snapshot the trainer
// could not resume from (agent/run/suspect.h). Beside the manifest, so the
// listing that finds the history finds the marks, and retention removes a
// mark with its snapshot.
std::string SuspectKey(const std::string& job, uint64_t seq);
std::optional<uint64_t> SuspectSeqOfKey(const std::string& job, std::string_view key);

std::string LeaseKey(const std::string& job);     // "<job>/lease"
std::string CompleteKey(const std::string& job);  // "<job>/complete"

// A fence holds its data in its key, so one LIST reads them all.
struct Fence {
  uint64_t generation = 0;
  uint64_t after_seq = 0;  // the newest seq of the history when it was drawn
};
std::string FencesPrefix(const std::string& job);  // "<job>/fences/"
std::string FenceKey(const std::string& job, const Fence& fence);
std::optional<Fence> ParseFenceKey(const std::string& job, const std::string& key);

// A quarantined data object (docs/design.md §4, "Quarantine"): one
// create-only object per damaged key, named after it, so one LIST reads
// them all. `data_key` is relative to the job prefix (a SeqOfDataKey key):
// "<job>/quarantine/snapshots/<seq>/files/<path>.zst.json".
std::string QuarantinePrefix(const std::string& job);  // "<job>/quarantine/"
std::string QuarantineKey(const std::string& job, std::string_view data_key);
// The data key that a quarantine object names; nullopt for any other key.
std::optional<std::string> QuarantinedKeyOf(const std::string& job, std::string_view key);

std::string EventsPrefix(const std::string& job);  // "<job>/events/"
// "<job>/events/<stamp>-<kind>.json"; `stamp` is the event's UTC time
// without '-' and ':' (20261122T082200.123Z), so name order is time order.
std::string EventKey(const std::string& job, std::string_view stamp, std::string_view kind);
// The kind of an event's key ("notice" of ".../20261122T082200.123Z-notice.json");
// "" when it is not one.
std::string EventKindOfKey(std::string_view key);

// A shipped log segment (docs/design.md §13). The attempt is the lease
// generation of the agent that wrote it; `seq` numbers the segments of that
// agent; `stamp` is the time of its first line, in EventKey's form. Name
// order within an instance is (generation, seq) order.
struct LogSegmentName {
  std::string instance;
  uint64_t generation = 0;
  uint64_t seq = 0;
  std::string stamp;
};
std::string LogsPrefix(const std::string& job);  // "<job>/logs/"
std::string LogSegmentKey(const std::string& job, const LogSegmentName& name);
std::optional<LogSegmentName> ParseLogSegmentKey(const std::string& job, std::string_view key);
// "2026-11-22T08:22:00.123Z" as "20261122T082200.123Z" (EventKey's stamp).
std::string CompactStamp(std::string_view time_utc);

}  // namespace sg
