#include "agent/repo/snapshot_catalog.h"

#include <algorithm>
#include <future>

#include "agent/repo/fencing.h"
#include "agent/repo/quarantine.h"
#include "agent/repo/store_layout.h"
#include "common/bounded_executor.h"
#include "common/log.h"

namespace sg {

std::vector<Manifest> SnapshotHistory::Readable() const {
  std::vector<Manifest> out;
  for (const Entry& e : entries) {
    if (e.manifest.ok()) out.push_back(*e.manifest);
  }
  return out;
}

const Manifest* SnapshotHistory::Find(uint64_t seq) const {
  for (const Entry& e : entries) {
    if (e.seq == seq && e.manifest.ok()) return &*e.manifest;
  }
  return nullptr;
}

bool SnapshotHistory::IsSuspect(uint64_t seq) const {
  return std::find(suspect.begin(), suspect.end(), seq) != suspect.end();
}

SnapshotCatalog::SnapshotCatalog(ObjectStore& store, std::string job)
    : store_(store), job_(std::move(job)) {}

StatusOr<std::vector<uint64_t>> SnapshotCatalog::Committed() {
  // The two listings are independent: the fences are read beside the snapshots.
  auto fences_read = std::async(std::launch::async, [this] { return FenceTable::Read(store_, job_); });
  StatusOr<std::vector<ObjectInfo>> objects = ListAll(store_, SnapshotsPrefix(job_));
  StatusOr<FenceTable> fences = fences_read.get();
  SG_RETURN_IF_ERROR(fences.status());
  SG_RETURN_IF_ERROR(objects.status());
  return Admitted(*fences, *objects);
}

StatusOr<std::vector<uint64_t>> SnapshotCatalog::CommittedIn(
    const std::vector<ObjectInfo>& snapshot_objects) {
  SG_ASSIGN_OR_RETURN(FenceTable fences, FenceTable::Read(store_, job_));
  return Admitted(fences, snapshot_objects);
}

std::vector<uint64_t> SnapshotCatalog::Admitted(const FenceTable& fences,
                                                const std::vector<ObjectInfo>& snapshot_objects) {
  std::vector<uint64_t> seqs, marked;
  for (const ObjectInfo& o : snapshot_objects) {
    if (auto seq = ManifestSeqOfKey(job_, o.key)) seqs.push_back(*seq);
    if (auto seq = SuspectSeqOfKey(job_, o.key)) marked.push_back(*seq);
  }
  std::sort(seqs.rbegin(), seqs.rend());
  fenced_.clear();
  const uint64_t admitted_below = fences.AdmitsAnyUpTo();
  std::vector<uint64_t> judged;
  for (uint64_t seq : seqs) {
    if (seq > admitted_below) judged.push_back(seq);
  }
  Prefetch(judged);
  std::vector<uint64_t> admitted;
  for (uint64_t seq : seqs) {
    if (seq > admitted_below) {
      // Only the manifest knows its generation. One that cannot be read is
      // kept: ReadManifest reports the damage and restore falls back.
      auto m = ReadManifest(seq);
      if (m.ok()) {
        if (auto fence = fences.Excluding(seq, m->generation)) {
          LogWarn(
              "snapshot {} was committed by lease generation {} after generation {} took over "
              "at snapshot {}: a fenced writer's late commit, not part of the job's history",
              SeqName(seq), m->generation, fence->generation, SeqName(fence->after_seq));
          fenced_.push_back(seq);
          continue;
        }
      }
    }
    admitted.push_back(seq);
  }
  suspect_.clear();
  for (uint64_t seq : admitted) {
    if (std::find(marked.begin(), marked.end(), seq) != marked.end()) suspect_.push_back(seq);
  }
  return admitted;
}

StatusOr<std::vector<uint64_t>> SnapshotCatalog::CommittedAndQuarantined(
    std::set<std::string>& quarantined) {
  auto quarantine_read =
      std::async(std::launch::async, [this] { return ReadQuarantine(store_, job_); });
  StatusOr<std::vector<uint64_t>> committed = Committed();
  StatusOr<std::set<std::string>> keys = quarantine_read.get();
  SG_RETURN_IF_ERROR(keys.status());
  quarantined = std::move(*keys);
  return committed;
}

StatusOr<SnapshotHistory> SnapshotCatalog::History() {
  SnapshotHistory history;
  SG_ASSIGN_OR_RETURN(std::vector<uint64_t> committed,
                      CommittedAndQuarantined(history.quarantined));
  history.job = job_;
  history.fenced = fenced_;
  history.suspect = suspect_;
  Prefetch(committed);
  for (uint64_t seq : committed) history.entries.push_back({seq, ReadManifest(seq)});
  return history;
}

StatusOr<Manifest> SnapshotCatalog::ReadManifest(uint64_t seq) {
  if (auto it = read_.find(seq); it != read_.end()) return it->second;
  SG_ASSIGN_OR_RETURN(std::string text, store_.Get(ManifestKey(job_, seq)));
  SG_ASSIGN_OR_RETURN(Manifest m, ParseManifest(text, job_, seq));
  read_.emplace(seq, m);
  return m;
}

void SnapshotCatalog::Prefetch(const std::vector<uint64_t>& seqs, int parallel) {
  std::vector<uint64_t> todo;
  for (uint64_t seq : seqs) {
    if (!read_.contains(seq)) todo.push_back(seq);
  }
  if (todo.size() < 2) return;  // ReadManifest's one GET is as quick
  std::vector<std::optional<Manifest>> got(todo.size());
  {
    const int threads = std::min<int>(std::max(parallel, 1), static_cast<int>(todo.size()));
    BoundedExecutor readers(threads, threads);
    for (size_t i = 0; i < todo.size(); ++i) {
      (void)readers.Submit([&, i]() -> Status {
        auto text = store_.Get(ManifestKey(job_, todo[i]));
        if (!text.ok()) return Status::Ok();
        auto m = ParseManifest(*text, job_, todo[i]);
        if (m.ok()) got[i] = std::move(*m);
        return Status::Ok();
      });
    }
    (void)readers.Wait();
  }
  for (size_t i = 0; i < todo.size(); ++i) {
    if (got[i]) read_.emplace(todo[i], std::move(*got[i]));
  }
}

}  // namespace sg
