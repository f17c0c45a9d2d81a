// What the node policy (agent/run/job_policy.h) remembers of a group's round
// when it runs in member mode (docs/design.md §9, "A member's coordination";
// the round protocol is §14's). One node's trainer, uploads and end are the
// same policy's; in a round three decisions follow the group instead: a
// trainer's exit ends the round for every node (it is not restarted alone),
// the part to upload is ChooseUpload's (agent/repo/group_protocol.h), and a
// checkpoint request is answered by a group snapshot that the coordinator
// names, not by this node's own commit.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "agent/repo/group_protocol.h"
#include "common/clock.h"

namespace sg {

// What a look read of the round that this node's side decides on.
struct RoundNews {
  std::optional<std::vector<PartRecord>> parts;  // every rank's parts of the round
  std::optional<int64_t> group_step;             // of the newest group snapshot
  bool answered = false;                         // final.json names the request's answer
  // Ranks warned in the round (a rebalance), with their step then.
  std::map<int, std::optional<int64_t>> flushes;
};

// The round this member takes part in; a new one on each join.
struct MemberRound {
  uint64_t round = 0;
  int rank = 0;
  std::optional<int64_t> part_step;      // of this node's newest stored part in the round
  std::optional<int64_t> restored_step;  // of the part restored on joining
  std::vector<int64_t> uploaded;         // steps uploaded (or tried) in the round
  std::vector<PartRecord> parts;         // every rank's parts, as last read
  std::set<int> flushes_taken;           // ranks whose flush this node acted on
  std::optional<int64_t> newest_step;    // of the newest local checkpoint, as last listed
  // A checkpoint request (a notice, a stop signal, the group's request).
  bool asked = false;                     // asked for and not answered
  bool ask_pending = false;               // asked_after comes from the next listing
  std::optional<Clock::WallTime> ask_at;  // asked then (the first notice or signal)
  std::optional<int64_t> asked_after;     // a part newer than this answers it
  std::optional<int64_t> answer_step;     // the part that answers it
  bool answered = false;                  // the coordinator named the answer
  Clock::MonoTime ending_deadline{};
  // A notice's budget for the trainer's answer (ComputeNoticeBudget): with
  // no checkpoint newer than the request by then, none could be uploaded
  // before the deadline.
  std::optional<Clock::MonoTime> answer_wait_until;
  bool trainer_done = false;  // exited 0: its last part goes up, then `done`
  bool done_busy = false, done_marked = false;
  bool announcing = false;  // a part's record is being written
  bool exit_after_stop = false;  // leaving the group: exit once the trainer is stopped
};

}  // namespace sg
