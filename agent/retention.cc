#include "agent/retention.h"

#include <algorithm>
#include <map>

#include "agent/snapshot_catalog.h"
#include "agent/store_layout.h"
#include "common/log.h"

namespace sg {

StatusOr<GcResult> CollectGarbage(ObjectStore& store, Clock& clock, const std::string& job,
                                  const GcOptions& options) {
  if (options.keep < 1) return Status::InvalidArgument("keep must be at least 1");
  struct Dir {
    bool committed = false;
    bool fenced = false;
    std::chrono::system_clock::time_point newest{};
    std::vector<std::string> keys;
  };
  std::map<uint64_t, Dir, std::greater<>> dirs;  // newest seq first
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> objects, ListAll(store, SnapshotsPrefix(job)));
  for (const ObjectInfo& o : objects) {
    auto seq = SnapshotSeqOfKey(job, o.key);
    if (!seq) continue;  // not ours; leave it alone
    Dir& d = dirs[*seq];
    d.keys.push_back(o.key);
    d.newest = std::max(d.newest, o.modified);
    if (o.key == ManifestKey(job, *seq)) d.committed = true;
  }

  // A fenced writer's late manifest commits nothing (agent/fencing.h): its
  // dir is removed like an abandoned one, and it never counts as kept. The
  // catalog judges the listing above: the snapshots are listed once.
  SnapshotCatalog catalog(store, job);
  SG_RETURN_IF_ERROR(catalog.CommittedIn(objects).status());
  for (uint64_t seq : catalog.Fenced()) {
    if (auto it = dirs.find(seq); it != dirs.end()) it->second.fenced = true;
  }

  GcResult result;
  auto remove_dir = [&](uint64_t seq, Dir& d) -> Status {
    // Uncommit first: with the manifest gone, what remains is never restored.
    const std::string manifest = ManifestKey(job, seq);
    if (d.committed) {
      SG_RETURN_IF_ERROR(store.Delete(manifest));
      ++result.objects_deleted;
    }
    for (const std::string& key : d.keys) {
      if (key == manifest) continue;
      SG_RETURN_IF_ERROR(store.Delete(key));
      ++result.objects_deleted;
    }
    return Status::Ok();
  };

  // Retention never deletes the last snapshot with a readable manifest: if
  // every kept one is damaged, the older ones stay.
  int kept = 0, kept_readable = 0;
  const auto cutoff = clock.Now() - options.abandoned_after;
  for (auto& [seq, d] : dirs) {
    if (d.fenced) {
      SG_RETURN_IF_ERROR(remove_dir(seq, d));
      result.abandoned.push_back(seq);
      continue;
    }
    if (d.committed) {
      if (kept < options.keep) {
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
      SG_RETURN_IF_ERROR(remove_dir(seq, d));
      result.deleted.push_back(seq);
    } else if (d.newest < cutoff) {
      SG_RETURN_IF_ERROR(remove_dir(seq, d));
      result.abandoned.push_back(seq);
    }
  }
  SG_ASSIGN_OR_RETURN(result.stale_writes,
                      store.CleanStaleWrites(JobPrefix(job), options.abandoned_after));
  if (!result.deleted.empty() || !result.abandoned.empty() || result.stale_writes > 0) {
    LogInfo("gc of job {}: removed {} old and {} abandoned snapshots ({} objects), {} stale writes",
            job, result.deleted.size(), result.abandoned.size(), result.objects_deleted,
            result.stale_writes);
  }
  return result;
}

}  // namespace sg
