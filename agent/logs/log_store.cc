#include "agent/logs/log_store.h"

#include <algorithm>
#include <set>

namespace sg {

StatusOr<std::vector<StoredLogSegment>> ListLogSegments(ObjectStore& store,
                                                        const std::string& job) {
  return Repository::Open(store, job).LogSegments();
}

StatusOr<std::optional<StoredLogSegment>> NewestLogSegment(ObjectStore& store,
                                                           const std::string& job) {
  SG_ASSIGN_OR_RETURN(std::vector<StoredLogSegment> all, ListLogSegments(store, job));
  if (all.empty()) return std::optional<StoredLogSegment>();
  return std::optional<StoredLogSegment>(all.back());
}

StatusOr<LogPruneResult> PruneLogs(ObjectStore& store, const std::string& job, int keep) {
  if (keep < 1) return Status::InvalidArgument("logs_keep must be at least 1");
  SG_ASSIGN_OR_RETURN(std::vector<StoredLogSegment> all, ListLogSegments(store, job));
  std::set<uint64_t, std::greater<>> attempts;
  for (const StoredLogSegment& s : all) attempts.insert(s.name.generation);
  LogPruneResult r;
  if (attempts.size() <= static_cast<size_t>(keep)) return r;
  const uint64_t oldest_kept = *std::next(attempts.begin(), keep - 1);
  for (const StoredLogSegment& s : all) {
    if (s.name.generation >= oldest_kept) continue;
    SG_RETURN_IF_ERROR(store.Delete(s.key));
    ++r.objects_deleted;
    if (r.attempts_removed.empty() || r.attempts_removed.back() != s.name.generation) {
      r.attempts_removed.push_back(s.name.generation);
    }
  }
  return r;
}

}  // namespace sg
