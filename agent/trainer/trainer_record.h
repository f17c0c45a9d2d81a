// The trainer an agent started, recorded beside the checkpoint dir so that
// the next agent on this host can stop what is left of it (docs/agent.md,
// "One agent per checkpoint directory, and no orphans"). An agent killed
// outside systemd leaves its trainer re-parented to PID 1; die_with_parent
// (common/process.h) ends it and its group, and this record is the second
// line: descendants of a trainer started by an older spotguard, or any that
// escaped the guard, are stopped before a new trainer writes into the dir.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace sg {

struct TrainerRecord {
  pid_t pid = 0;
  pid_t pgid = 0;
  uint64_t start_ticks = 0;  // of `pid`, /proc/PID/stat field 22
  std::string boot_id;
};

// "<parent>/.spotguard-<basename>.trainer".
std::string TrainerRecordPath(const std::string& checkpoint_dir);

// The record of the process `pid` that leads its own group `pgid`, as /proc
// shows it now.
StatusOr<TrainerRecord> RecordOf(pid_t pid, pid_t pgid);
Status WriteTrainerRecord(const std::string& path, const TrainerRecord& record);
// NotFound when there is none.
StatusOr<TrainerRecord> ReadTrainerRecord(const std::string& path);
void RemoveTrainerRecord(const std::string& path);

// The live (non-zombie) members of the recorded process group: processes
// with that pgrp that started no earlier than the recorded trainer, on the
// same boot. Empty when the group id now belongs to a process other than
// the recorded trainer (the old group ended and the id was reused).
std::vector<pid_t> LiveMembers(const TrainerRecord& record);

// Stops the group recorded for `checkpoint_dir` when it still has live
// members: `stop_signal` to the group, SIGKILL after `grace`; then removes
// the record. Returns how many live members it found (0: nothing to do).
// REQUIRES: the caller holds the checkpoint dir's HostLock, so the recorded
// agent is gone and its trainer is an orphan.
StatusOr<size_t> StopLeftoverTrainer(const std::string& checkpoint_dir, int stop_signal,
                                     std::chrono::milliseconds grace);

}  // namespace sg
