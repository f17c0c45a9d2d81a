#include "agent/repo/retention.h"

#include <algorithm>
#include <map>
#include <set>

#include "agent/repo/claim_keeper.h"
#include "agent/repo/manifest.h"
#include "agent/repo/quarantine.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/store_layout.h"
#include "common/log.h"

namespace sg {
namespace {

// One snapshot dir as a listing found it.
struct Dir {
  bool committed = false;
  bool claimed = false;
  bool fenced = false;
  bool suspect = false;  // marked: the trainer could not resume from it (agent/run/suspect.h)
  std::chrono::system_clock::time_point newest{};
  std::chrono::system_clock::time_point claim_written{};  // renewed by a live writer
  std::vector<std::string> keys;
};
using Dirs = std::map<uint64_t, Dir, std::greater<>>;  // newest seq first

StatusOr<Dirs> ListDirs(ObjectStore& store, const std::string& job,
                        std::vector<ObjectInfo>* objects) {
  SG_ASSIGN_OR_RETURN(*objects, ListAll(store, SnapshotsPrefix(job)));
  Dirs dirs;
  for (const ObjectInfo& o : *objects) {
    auto seq = SnapshotSeqOfKey(job, o.key);
    if (!seq) continue;  // not ours; leave it alone
    Dir& d = dirs[*seq];
    d.keys.push_back(o.key);
    d.newest = std::max(d.newest, o.modified);
    if (o.key == ManifestKey(job, *seq)) d.committed = true;
    if (o.key == ClaimKey(job, *seq)) {
      d.claimed = true;
      d.claim_written = o.modified;
    }
    if (o.key == SuspectKey(job, *seq)) d.suspect = true;
  }
  return dirs;
}

// The objects (full keys) that the manifests in `dirs` reference. A manifest
// that is gone or damaged references nothing that a restore would read; any
// other failure to read one stops gc before it deletes data. The catalog
// reads each manifest once (a seq's manifest never changes: it is written
// create-only under a claimed seq).
StatusOr<std::set<std::string>> Referenced(SnapshotCatalog& catalog, const std::string& job,
                                           const Dirs& dirs) {
  std::set<std::string> keys;
  std::vector<uint64_t> committed;
  for (const auto& [seq, d] : dirs) {
    if (d.committed) committed.push_back(seq);
  }
  catalog.Prefetch(committed);
  for (const auto& [seq, d] : dirs) {
    if (!d.committed) continue;
    auto m = catalog.ReadManifest(seq);
    if (!m.ok()) {
      // Gone, or damaged: never restored, so it needs nothing.
      if (m.status().Is(StatusCode::kNotFound) || m.status().Is(StatusCode::kCorruption)) continue;
      return m.status().WithContext("read the manifest of snapshot " + SeqName(seq));
    }
    for (const std::string& key : m->ReferencedKeys()) keys.insert(JobPrefix(job) + key);
  }
  return keys;
}

// When gc takes the writers of a job for live (docs/design.md §4, "Live
// writers"): a claim renewed within kClaimTtl, whatever `--older-than` says;
// or, for a writer that does not renew its claim (an older agent), an
// object of its dir younger than `cutoff`. `break_claims` takes every
// writer for dead.
struct Liveness {
  Clock::WallTime cutoff;
  Clock::WallTime claims_after;
  bool break_claims = false;

  bool Live(const Dir& d) const {
    if (!d.claimed || d.committed || break_claims) return false;
    return d.claim_written >= claims_after || d.newest >= cutoff;
  }
};

// Step 1 of gc for snapshot dir `seq`: the claim, then the manifest. With
// the manifest gone, what remains is never restored, and no writer that
// lists afterwards indexes it.
Status GcUncommitDir(ObjectStore& store, const std::string& job, uint64_t seq, const Dir& d,
                     GcResult& result) {
  if (d.claimed) {
    SG_RETURN_IF_ERROR(store.Delete(ClaimKey(job, seq)));
    ++result.objects_deleted;
  }
  if (d.committed) {
    SG_RETURN_IF_ERROR(store.Delete(ManifestKey(job, seq)));
    ++result.objects_deleted;
  }
  return Status::Ok();
}

// Reads ahead the manifests of the snapshots that retention keeps.
void GcPrefetchKept(SnapshotCatalog& catalog, const Dirs& dirs, int keep) {
  std::vector<uint64_t> to_keep;
  for (const auto& [seq, d] : dirs) {
    if (d.committed && !d.fenced && !d.suspect && static_cast<int>(to_keep.size()) < keep) {
      to_keep.push_back(seq);
    }
  }
  catalog.Prefetch(to_keep);
}

// 1. Uncommits the fenced snapshots, the committed ones beyond the newest
// `keep` good ones, and abandoned uncommitted ones (a claim not live).
// Retention never deletes the last snapshot with a readable manifest: if
// every kept one is damaged, the older ones stay.
// `quarantined`: the snapshots that need a quarantined object.
Status GcUncommitOld(ObjectStore& store, SnapshotCatalog& catalog, const std::string& job,
                     const Dirs& dirs, const GcOptions& options, const Liveness& liveness,
                     const std::set<uint64_t>& quarantined, GcResult& result) {
  int kept = 0, kept_readable = 0;
  for (const auto& [seq, d] : dirs) {
    if (d.fenced) {
      SG_RETURN_IF_ERROR(GcUncommitDir(store, job, seq, d, result));
      result.abandoned.push_back(seq);
      continue;
    }
    if (d.committed && options.retire) {
      if (!options.retire(seq, catalog)) continue;
      SG_RETURN_IF_ERROR(GcUncommitDir(store, job, seq, d, result));
      result.deleted.push_back(seq);
    } else if (d.committed) {
      // A suspect snapshot, or one that needs a quarantined object, is
      // never one of the kept good ones: it stays while newer than the
      // oldest of them (for `unsuspect`, or a restore of that seq), uncounted.
      const bool uncounted = d.suspect || quarantined.contains(seq);
      if (uncounted && kept < options.keep) continue;
      if (!uncounted && kept < options.keep) {
        ++kept;
        if (catalog.ReadManifest(seq).ok()) ++kept_readable;
        continue;
      }
      if (kept_readable == 0) {
        LogWarn(
            "gc of job {}: none of the newest {} snapshots has a readable manifest; "
            "keeping snapshot {} and older",
            job, options.keep, SeqName(seq));
        continue;
      }
      SG_RETURN_IF_ERROR(GcUncommitDir(store, job, seq, d, result));
      result.deleted.push_back(seq);
    } else if (d.claimed && !liveness.Live(d)) {
      SG_RETURN_IF_ERROR(GcUncommitDir(store, job, seq, d, result));
      result.abandoned.push_back(seq);
    }
  }
  return Status::Ok();
}

// The uncommitted snapshots of `dirs` whose writers are live.
std::vector<uint64_t> LiveWriters(const Dirs& dirs, const Liveness& liveness) {
  std::vector<uint64_t> live;
  for (const auto& [seq, d] : dirs) {
    if (liveness.Live(d)) live.push_back(seq);
  }
  return live;
}

// Steps 2 and 3 on the second listing `now`: while a writer whose claim is in
// it is live, no data object goes; otherwise every object of a dir without
// claim or manifest goes, unless a manifest of this listing references it.
// The keys it deletes go into `gone`.
Status GcDeleteUnreferenced(ObjectStore& store, SnapshotCatalog& catalog, const std::string& job,
                            const Dirs& now, const std::vector<uint64_t>& live,
                            std::set<std::string>& gone, GcResult& result) {
  if (!live.empty()) {
    LogInfo("gc of job {}: snapshot {} is being written; old objects stay until the next gc", job,
            SeqName(live.front()));
    return Status::Ok();
  }
  SG_ASSIGN_OR_RETURN(const std::set<std::string> referenced, Referenced(catalog, job, now));
  for (const auto& [seq, d] : now) {
    if (d.committed || d.claimed) continue;
    for (const std::string& key : d.keys) {
      if (referenced.contains(key)) continue;
      SG_RETURN_IF_ERROR(store.Delete(key));
      gone.insert(key);
      ++result.objects_deleted;
    }
  }
  return Status::Ok();
}

// The quarantine entries whose object is gone: not in the second listing
// `objects`, or deleted by step 3 (`gone`). Relative to "<job>/".
std::vector<std::string> StaleQuarantine(const std::string& job,
                                         const std::set<std::string>& quarantine,
                                         const std::vector<ObjectInfo>& objects,
                                         const std::set<std::string>& gone) {
  std::set<std::string> present;
  for (const ObjectInfo& o : objects) present.insert(o.key);
  std::vector<std::string> stale;
  for (const std::string& key : quarantine) {
    const std::string full = JobPrefix(job) + key;
    if (!present.contains(full) || gone.contains(full)) stale.push_back(key);
  }
  return stale;
}

}  // namespace

// The order of the steps is what makes frame reuse safe against a writer
// running at the same time (docs/design.md §4, "Retention with shared
// objects"): uncommit first, list again, then delete data only when no
// writer is live and no manifest of the second listing needs it.
StatusOr<GcResult> CollectGarbage(ObjectStore& store, Clock& clock, const std::string& job,
                                  const GcOptions& options) {
  if (options.keep < 1) return Status::InvalidArgument("keep must be at least 1");
  std::vector<ObjectInfo> objects;
  SG_ASSIGN_OR_RETURN(Dirs dirs, ListDirs(store, job, &objects));

  // A fenced writer's late manifest commits nothing (agent/repo/fencing.h): its
  // dir is removed like an abandoned one, and it never counts as kept. The
  // catalog judges the listing above: the snapshots are listed once.
  SnapshotCatalog catalog(store, job);
  SG_ASSIGN_OR_RETURN(const std::vector<uint64_t> admitted, catalog.CommittedIn(objects));
  for (uint64_t seq : catalog.Fenced()) {
    if (auto it = dirs.find(seq); it != dirs.end()) it->second.fenced = true;
  }
  // Snapshots that need a quarantined object (docs/design.md §4,
  // "Quarantine"): one LIST (unless the caller read it), and their manifests
  // read ahead when there is one.
  std::set<std::string> listed_quarantine;
  if (!options.quarantine) {
    SG_ASSIGN_OR_RETURN(listed_quarantine, ReadQuarantine(store, job));
  }
  const std::set<std::string>& quarantine =
      options.quarantine ? *options.quarantine : listed_quarantine;
  const std::set<uint64_t> quarantined =
      options.retire ? std::set<uint64_t>() : SnapshotsNeeding(catalog, admitted, quarantine);

  GcResult result;
  // 1. Uncommit.
  if (!options.retire) GcPrefetchKept(catalog, dirs, options.keep);
  const Clock::WallTime now_time = clock.Now();
  const Liveness liveness{.cutoff = now_time - options.abandoned_after,
                          .claims_after = now_time - kClaimTtl,
                          .break_claims = options.break_claims};
  SG_RETURN_IF_ERROR(
      GcUncommitOld(store, catalog, job, dirs, options, liveness, quarantined, result));

  // 2. List again. A writer whose claim is in this listing may have indexed
  // what step 1 uncommitted: while one is live, no data object goes. 3. The
  // objects no manifest of this listing references.
  SG_ASSIGN_OR_RETURN(Dirs now, ListDirs(store, job, &objects));
  const std::vector<uint64_t> live = LiveWriters(now, liveness);
  std::set<std::string> gone;
  SG_RETURN_IF_ERROR(GcDeleteUnreferenced(store, catalog, job, now, live, gone, result));
  // An entry outlives its object only until now: a later object of the same
  // key (a seq claimed again) is not taken for damaged.
  result.unquarantined = StaleQuarantine(job, quarantine, objects, gone);
  SG_RETURN_IF_ERROR(ForgetQuarantined(store, job, result.unquarantined));
  // A live writer's unfinished upload stays, however old: one file may take
  // longer than `--older-than` to upload.
  const KeyFilter spare_live = [&](const std::string& key) {
    auto seq = SnapshotSeqOfKey(job, key);
    return seq && std::find(live.begin(), live.end(), *seq) != live.end();
  };
  SG_ASSIGN_OR_RETURN(result.stale_writes,
                      store.CleanStaleWrites(JobPrefix(job), options.abandoned_after, spare_live));
  if (!result.deleted.empty() || !result.abandoned.empty() || result.stale_writes > 0 ||
      !result.unquarantined.empty()) {
    LogInfo(
        "gc of job {}: removed {} old and {} abandoned snapshots ({} objects), {} stale writes, "
        "{} quarantine entries of objects gone",
        job, result.deleted.size(), result.abandoned.size(), result.objects_deleted,
        result.stale_writes, result.unquarantined.size());
  }
  return result;
}

}  // namespace sg
