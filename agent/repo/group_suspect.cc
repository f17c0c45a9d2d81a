#include "agent/repo/group_suspect.h"

#include "agent/repo/store_layout.h"

namespace sg {

Status MarkGroupSuspect(ObjectStore& store, const std::string& job, uint64_t seq,
                        const nlohmann::ordered_json& record) {
  return store.Put(GroupSuspectKey(job, seq), record.dump(), PutCondition::None()).status();
}

StatusOr<std::set<uint64_t>> GroupSuspects(ObjectStore& store, const std::string& job) {
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> listed, ListAll(store, GroupSuspectsPrefix(job)));
  std::set<uint64_t> out;
  for (const ObjectInfo& o : listed) {
    if (auto seq = GroupSuspectSeqOfKey(job, o.key)) out.insert(*seq);
  }
  return out;
}

Status ClearGroupSuspect(ObjectStore& store, const std::string& job, uint64_t seq) {
  SG_RETURN_IF_ERROR(store.Head(GroupSuspectKey(job, seq)).status());
  return store.Delete(GroupSuspectKey(job, seq));
}

std::optional<uint64_t> GroupResumeGuard::RoundEnded(std::optional<uint64_t> resume_seq,
                                                     bool crash, bool committed,
                                                     const std::string& why) {
  // Only a crash of a round that resumed a group snapshot and committed
  // nothing counts; anything else starts the count again.
  const bool counts = crash && resume_seq && !committed;
  if (!counts) {
    seq_.reset();
    ends_.clear();
    return std::nullopt;
  }
  if (seq_ != resume_seq) {
    seq_ = resume_seq;
    ends_.clear();
  }
  ends_.push_back(why);
  if (static_cast<int>(ends_.size()) < max_failures_) return std::nullopt;
  seq_.reset();  // marked: the next round resumes elsewhere
  return resume_seq;
}

}  // namespace sg
