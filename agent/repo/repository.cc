#include "agent/repo/repository.h"

#include <algorithm>
#include <tuple>

#include "agent/repo/quarantine.h"
#include "agent/repo/snapshot_file_reader.h"
#include "agent/repo/store_layout.h"

namespace sg {
namespace {

// The object at `key`; nullopt when there is none.
StatusOr<std::optional<std::string>> GetIfPresent(ObjectStore& store, const std::string& key) {
  auto body = store.Get(key);
  if (body.status().Is(StatusCode::kNotFound)) return std::optional<std::string>();
  SG_RETURN_IF_ERROR(body.status());
  return std::optional<std::string>(std::move(*body));
}

}  // namespace

Repository Repository::Part(int rank) const { return Repository(*store_, PartJob(job_, rank)); }

std::string Repository::PartRelativeKey(int rank, std::string_view key) {
  return sg::PartRelativeKey(rank, key);
}

StatusOr<SnapshotResult> Repository::Write(Clock& clock, const SnapshotOptions& options,
                                           const CapturedCheckpoint& capture,
                                           SnapshotRequest request,
                                           const ProgressFn& progress) const {
  request.job = job_;
  SnapshotWriter writer(*store_, clock, options);
  return writer.Write(capture, request, progress);
}

StatusOr<RestoreResult> Repository::Restore(const RestoreOptions& options,
                                            const std::string& target_dir,
                                            std::optional<uint64_t> seq,
                                            const ProgressFn& progress) const {
  Restorer restorer(*store_, options);
  return restorer.Restore(job_, target_dir, seq, progress);
}

StatusOr<RestoreResult> Repository::RestoreNewest(const RestoreOptions& options,
                                                  const SnapshotHistory& history,
                                                  const std::string& target_dir,
                                                  const ProgressFn& progress) const {
  Restorer restorer(*store_, options);
  return restorer.RestoreNewest(history, target_dir, progress);
}

StatusOr<GroupGcResult> Repository::PruneGroup(Clock& clock, const GcOptions& options) const {
  return CollectGroupGarbage(*store_, clock, job_, options);
}

Repository::Verified Repository::Verify(const Manifest& manifest,
                                        const ProgressFn& progress) const {
  SnapshotFileReader reader(*store_, job_);
  Verified out;
  out.status = reader.Verify(manifest, progress);
  out.quarantined = QuarantineDamaged(*store_, job_, reader, out.status, "verify", manifest.seq);
  return out;
}

StatusOr<GcResult> Repository::Prune(Clock& clock, const GcOptions& options) const {
  return CollectGarbage(*store_, clock, job_, options);
}

StatusOr<std::set<std::string>> Repository::Quarantined() const {
  return ReadQuarantine(*store_, job_);
}

Status Repository::MarkSuspect(uint64_t seq, const std::string& body) const {
  return store_->Put(SuspectKey(job_, seq), body, PutCondition::None()).status();
}

Status Repository::ClearSuspect(uint64_t seq) const {
  SG_RETURN_IF_ERROR(store_->Head(SuspectKey(job_, seq)).status());
  return store_->Delete(SuspectKey(job_, seq));
}

StatusOr<bool> Repository::IsComplete() const {
  auto head = store_->Head(CompleteKey(job_));
  if (head.ok()) return true;
  if (head.status().Is(StatusCode::kNotFound)) return false;
  return head.status();
}

StatusOr<std::optional<std::string>> Repository::ReadComplete() const {
  return GetIfPresent(*store_, CompleteKey(job_));
}

Status Repository::MarkComplete(const std::string& body) const {
  return store_->Put(CompleteKey(job_), body, PutCondition::CreateOnly()).status();
}

StatusOr<std::optional<std::string>> Repository::ReadLease() const {
  return GetIfPresent(*store_, LeaseKey(job_));
}

std::string Repository::CompleteName() const { return CompleteKey(job_); }
std::string Repository::LeaseName() const { return LeaseKey(job_); }

Status Repository::PutEvent(std::string_view stamp, std::string_view kind,
                            const std::string& body) const {
  return store_->Put(EventKey(job_, stamp, kind), body, PutCondition::CreateOnly()).status();
}

StatusOr<std::vector<StoredEvent>> Repository::Events() const {
  const std::string prefix = EventsPrefix(job_);
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListAll(*store_, prefix));
  std::vector<StoredEvent> out;
  out.reserve(listed.size());
  for (const ObjectInfo& o : listed) {
    const std::string_view name = std::string_view(o.key).substr(prefix.size());
    const size_t dash = name.find('-');
    out.push_back({o.key, std::string(name.substr(0, dash == std::string_view::npos ? 0 : dash)),
                   EventKindOfKey(o.key)});
  }
  return out;
}

StatusOr<std::string> Repository::PutLogSegment(const LogSegmentName& name,
                                                const std::string& body) const {
  std::string key = LogSegmentKey(job_, name);
  SG_RETURN_IF_ERROR(store_->Put(key, body, PutCondition::None()).status());
  return key;
}

StatusOr<std::vector<StoredLogSegment>> Repository::LogSegments() const {
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> objects, ListAll(*store_, LogsPrefix(job_)));
  std::vector<StoredLogSegment> out;
  for (const ObjectInfo& o : objects) {
    if (auto name = ParseLogSegmentKey(job_, o.key)) out.push_back({o.key, *name, o.size});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const StoredLogSegment& a, const StoredLogSegment& b) {
                     return std::tie(a.name.generation, a.name.seq, a.name.stamp, a.name.instance) <
                            std::tie(b.name.generation, b.name.seq, b.name.stamp, b.name.instance);
                   });
  return out;
}

std::string Repository::Prefix() const { return job_.empty() ? "" : JobPrefix(job_); }

std::string Repository::ProbePrefix(std::string_view id) const {
  return DoctorProbePrefix(job_, id);
}

}  // namespace sg
