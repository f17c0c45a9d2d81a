// Group snapshots the trainers cannot resume from (docs/multi-node.md, "A
// group snapshot the trainers cannot resume from"; one node's are
// agent/run/suspect.h). A round resumed from group snapshot S that a crash
// ends, with no group snapshot committed in it, counts against S;
// resume.max_failures such rounds in a row mark S suspect in the store
// (group/suspect/<seq>.json, with each round's end), and every later round
// resumes from the newest group snapshot that is not suspect. `spotguard
// unsuspect SEQ` on a group's config clears the mark.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/object_store.h"
#include "common/status.h"

namespace sg {

// The marks are "<job>/group/suspect/<seq>.json" (agent/repo/store_layout.h).
Status MarkGroupSuspect(ObjectStore& store, const std::string& job, uint64_t seq,
                        const nlohmann::ordered_json& record);
// The seqs marked suspect.
StatusOr<std::set<uint64_t>> GroupSuspects(ObjectStore& store, const std::string& job);
// NotFound when `seq` carries no mark.
Status ClearGroupSuspect(ObjectStore& store, const std::string& job, uint64_t seq);

// The coordinator's count of rounds in a row that a crash ended while
// resumed from one group snapshot, without a newer one committed. Pure.
class GroupResumeGuard {
 public:
  explicit GroupResumeGuard(int max_failures) : max_failures_(max_failures) {}
  // A round ended. `resume_seq`: the group snapshot it resumed from (none:
  // fresh); `crash`: a trainer failed; `committed`: a group snapshot was
  // committed in the round (the trainers got past their resume); `why`: how
  // it ended (kept for the record). Returns the seq to mark suspect when
  // this end makes max_failures.
  std::optional<uint64_t> RoundEnded(std::optional<uint64_t> resume_seq, bool crash,
                                     bool committed, const std::string& why);
  // How the failed rounds from the seq just named ended.
  const std::vector<std::string>& ends() const { return ends_; }

 private:
  const int max_failures_;
  std::optional<uint64_t> seq_;
  std::vector<std::string> ends_;
};

}  // namespace sg
