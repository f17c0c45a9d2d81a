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
//   <job>/.doctor/<id>/...                 `spotguard doctor`'s probe objects, removed by it
//
// and those of a job of several nodes (docs/multi-node.md; the records are
// agent/repo/group_store.h's):
//
//   <job>/group/members/<agent>.json       a member record
//   <job>/group/failed.json                the job failed
//   <job>/group/refused/<agent>.json       a member the coordinator refused
//   <job>/group/suspect/<seq>.json         a group snapshot no round could resume from
//   <job>/group/rounds/<round>/plan.json   a round's plan; beside it final.json,
//                                          end/<instance>.json, parts/<step>-<rank>-<seq>.json,
//                                          done/<rank>.json, asked/<rank>.json, flush/<rank>.json
//   <job>/groups/<seq>.json                a group snapshot
//   <job>/nodes/<rank>/...                 a rank's parts: a job of its own (PartJob)
//
// The repository (agent/repo/repository.h) is the one owner of these keys:
// this header is included by agent/repo/ alone (tests/tools/source_layers.py).
// <seq> and <generation> are ten-digit decimals, so name order is numeric
// order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "agent/repo/store_names.h"
#include "common/zstd_codec.h"

namespace sg {

std::string JobPrefix(const std::string& job);                     // "<job>/"
std::string SnapshotsPrefix(const std::string& job);               // "<job>/snapshots/"
std::string SnapshotPrefix(const std::string& job, uint64_t seq);  // ".../<seq>/"
std::string ManifestKey(const std::string& job, uint64_t seq);
std::string ClaimKey(const std::string& job, uint64_t seq);
std::string LatestKey(const std::string& job);
// Where snapshot `seq`'s own data objects are, relative to the job prefix:
// "snapshots/<seq>/".
std::string SnapshotObjectsPrefix(uint64_t seq);
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

std::string LogsPrefix(const std::string& job);  // "<job>/logs/"
std::string LogSegmentKey(const std::string& job, const LogSegmentName& name);
std::optional<LogSegmentName> ParseLogSegmentKey(const std::string& job, std::string_view key);

// Where `spotguard doctor` writes and removes its probe objects: "<job>/.doctor/<id>/"
// ("" job: ".doctor/<id>/" at the top of the store).
std::string DoctorProbePrefix(const std::string& job, std::string_view id);

// ---- A job of several nodes (docs/multi-node.md).

// A rank's parts are snapshots of a job of their own: "<job>/nodes/<rank>".
std::string PartJob(const std::string& job, int rank);
// `key`, relative to the part job of `rank`, made relative to "<job>/":
// "nodes/<rank>/<key>".
std::string PartRelativeKey(int rank, std::string_view key);

std::string GroupMembersPrefix(const std::string& job);  // "<job>/group/members/"
std::string GroupMemberKey(const std::string& job, const std::string& agent);
std::string GroupRefusalKey(const std::string& job, const std::string& agent);
std::string GroupFailureKey(const std::string& job);  // "<job>/group/failed.json"
std::string GroupSuspectsPrefix(const std::string& job);  // "<job>/group/suspect/"
std::string GroupSuspectKey(const std::string& job, uint64_t seq);
std::optional<uint64_t> GroupSuspectSeqOfKey(const std::string& job, std::string_view key);

std::string GroupRoundsPrefix(const std::string& job);  // "<job>/group/rounds/"
std::string GroupRoundPrefix(const std::string& job, uint64_t round);
std::string GroupPlanKey(const std::string& job, uint64_t round);
// The round of a plan's key; nullopt for any other key.
std::optional<uint64_t> RoundOfPlanKey(const std::string& job, std::string_view key);
std::string GroupFinalKey(const std::string& job, uint64_t round);
// The records of a round kept in a folder each, one per instance (end) or per
// rank (the others).
enum class RoundRecords { kEnds, kParts, kDone, kAsked, kFlush };
std::string RoundRecordsPrefix(const std::string& job, uint64_t round, RoundRecords kind);
std::string RoundEndKey(const std::string& job, uint64_t round, const std::string& by);
// "<step>-<rank>-<seq>.json": <step> in twenty digits after an offset of
// 2^63, so that name order is step order also for a negative step.
std::string RoundPartKey(const std::string& job, uint64_t round, int64_t step, int rank,
                         uint64_t seq);
// A done, asked or flush record of `rank`.
std::string RoundRankKey(const std::string& job, uint64_t round, RoundRecords kind, int rank);

std::string GroupsPrefix(const std::string& job);  // "<job>/groups/"
std::string GroupKey(const std::string& job, uint64_t seq);
std::optional<uint64_t> GroupSeqOfKey(const std::string& job, std::string_view key);

// The name after `prefix` without ".json" ("<prefix><name>.json", no '/' in
// <name>); "" when `key` is not such a name.
std::string RecordNameOf(std::string_view key, std::string_view prefix);

}  // namespace sg
