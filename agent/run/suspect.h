// Snapshots the trainer cannot resume from (docs/design.md §9, "A snapshot
// the trainer cannot resume from"; docs/agent.md). When the trainer fails
// resume.max_failures times after resuming from snapshot S without writing
// a newer checkpoint (agent/run/resume_guard.h decides), S is marked suspect in
// the store, with the exit codes and the trainer's last lines. Every start
// resumes from the newest snapshot that is not suspect; a local copy of S
// is moved beside the checkpoint dir, never deleted. `spotguard unsuspect
// SEQ` clears the mark.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/ledger/events.h"
#include "agent/run/job_start.h"
#include "agent/repo/snapshot_catalog.h"
#include "common/clock.h"
#include "common/object_store.h"

namespace sg {

struct SuspectRecord {
  uint64_t seq = 0;
  std::string time;      // UTC, when it was marked
  std::string instance;  // the agent's that marked it
  std::string resume;    // what the trainer was started from
  std::vector<std::string> exits;       // how each failed run ended
  std::vector<std::string> last_lines;  // the trainer's last output lines

  nlohmann::ordered_json ToJson() const;
};

// Writes SuspectKey(job, record.seq) (replacing an older mark).
Status MarkSuspect(ObjectStore& store, const std::string& job, const SuspectRecord& record);
// Removes the mark; NotFound when `seq` carries none.
Status ClearSuspect(ObjectStore& store, const std::string& job, uint64_t seq);

// Before a restore: leaves the suspect snapshots out of `history` (each
// named in the log), and when the newest complete local checkpoint is one
// of them (same step, or the same bytes), moves its files to
// `<checkpoint_dir>.spotguard-suspect-<seq>/` (a new dir each time) and
// says so; they are never deleted.
Status SetAsideSuspect(const Config& config, Clock& clock, SnapshotHistory& history);

// In a run, once the guard names `record.seq`: marks it, records the
// `suspect` event, and restores at start again (RestoreAtStart), which now
// sets the local copy aside and resumes from the newest snapshot that is
// not suspect.
StatusOr<StartPoint> FallBackFromSuspect(ObjectStore& store, Clock& clock, const Config& config,
                                         EventLog& events, const SuspectRecord& record);

// `spotguard unsuspect SEQ`: 0 cleared; 2 SEQ is not a snapshot seq; 3 the
// snapshot carries no mark; 1 the store failed.
int RunUnsuspectCommand(const Config& config, const std::map<std::string, std::string>& env,
                        const std::string& seq_text);

}  // namespace sg
