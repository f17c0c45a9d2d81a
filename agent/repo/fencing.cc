#include "agent/repo/fencing.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "agent/repo/lease.h"
#include "agent/repo/snapshot_catalog.h"
#include "common/log.h"

namespace sg {

FenceTable::FenceTable(std::vector<Fence> fences) : fences_(std::move(fences)) {
  std::sort(fences_.begin(), fences_.end(), [](const Fence& a, const Fence& b) {
    return a.generation != b.generation ? a.generation < b.generation : a.after_seq < b.after_seq;
  });
}

StatusOr<FenceTable> FenceTable::Read(ObjectStore& store, const std::string& job) {
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> objects, ListAll(store, FencesPrefix(job)));
  std::vector<Fence> fences;
  for (const ObjectInfo& o : objects) {
    if (auto f = ParseFenceKey(job, o.key)) fences.push_back(*f);
  }
  return FenceTable(std::move(fences));
}

std::optional<Fence> FenceTable::Excluding(uint64_t seq, uint64_t generation) const {
  for (const Fence& f : fences_) {
    if (f.generation > generation && seq > f.after_seq) return f;
  }
  return std::nullopt;
}

uint64_t FenceTable::AdmitsAnyUpTo() const {
  uint64_t low = UINT64_MAX;
  for (const Fence& f : fences_) low = std::min(low, f.after_seq);
  return low;
}

Status WriteFence(ObjectStore& store, const std::string& job, const Fence& fence,
                  const std::string& body) {
  auto put = store.Put(FenceKey(job, fence), body, PutCondition::CreateOnly());
  if (put.ok() || put.status().Is(StatusCode::kPreconditionFailed)) return Status::Ok();
  return put.status().WithContext("record fence of lease generation " +
                                  std::to_string(fence.generation));
}

StatusOr<Fence> DrawFence(ObjectStore& store, const std::string& job, uint64_t generation,
                          const std::string& instance, const std::string& time) {
  SnapshotCatalog catalog(store, job);
  SG_ASSIGN_OR_RETURN(std::vector<uint64_t> history, catalog.Committed());
  return DrawFenceAfter(store, job, generation, history.empty() ? 0 : history.front(), instance,
                        time);
}

StatusOr<Fence> DrawFenceAfter(ObjectStore& store, const std::string& job, uint64_t generation,
                               uint64_t newest_seq, const std::string& instance,
                               const std::string& time) {
  const Fence fence{generation, newest_seq};
  const nlohmann::ordered_json body = {{"generation", fence.generation},
                                       {"after_seq", fence.after_seq},
                                       {"instance", instance},
                                       {"time", time}};
  SG_RETURN_IF_ERROR(WriteFence(store, job, fence, body.dump()));
  LogInfo("lease generation {} fences off later commits of earlier generations above snapshot {}",
          fence.generation, SeqName(fence.after_seq));
  return fence;
}

StatusOr<uint64_t> LeaseGenerationNow(ObjectStore& store, const std::string& job) {
  auto body = store.Get(LeaseKey(job));
  if (!body.ok()) {
    if (body.status().Is(StatusCode::kNotFound)) return uint64_t{0};
    return body.status();
  }
  auto lease = LeaseKeeper::Parse(*body);
  return lease.ok() ? lease->generation : 0;
}

}  // namespace sg
