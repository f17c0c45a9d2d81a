#include "agent/trainer/trainer_record.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/trainer/host_lock.h"
#include "common/files.h"
#include "common/log.h"
#include "common/proc_stat.h"
#include "common/signal_names.h"

namespace sg {
namespace {

using std::chrono::milliseconds;

// Polls until the group has no live member or `timeout` passed; returns
// whether it is empty.
bool WaitUntilEmpty(const TrainerRecord& record, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (LiveMembers(record).empty()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(50));
  }
}

std::string PidList(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t p : pids) out += (out.empty() ? "" : " ") + std::to_string(p);
  return out;
}

}  // namespace

std::string TrainerRecordPath(const std::string& checkpoint_dir) {
  return BesideCheckpointDir(checkpoint_dir, ".trainer");
}

StatusOr<TrainerRecord> RecordOf(pid_t pid, pid_t pgid) {
  SG_ASSIGN_OR_RETURN(ProcStat st, ReadProcStat(pid));
  return TrainerRecord{pid, pgid, st.start_ticks, BootId()};
}

Status WriteTrainerRecord(const std::string& path, const TrainerRecord& r) {
  nlohmann::ordered_json j = {{"pid", r.pid},
                              {"pgid", r.pgid},
                              {"start_ticks", r.start_ticks},
                              {"boot_id", r.boot_id},
                              {"agent_pid", ::getpid()}};
  return WriteFileAtomic(path, j.dump() + "\n");
}

StatusOr<TrainerRecord> ReadTrainerRecord(const std::string& path) {
  SG_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("pgid") || !j["pgid"].is_number_integer() ||
      !j.contains("start_ticks") || !j["start_ticks"].is_number_unsigned()) {
    return Status::Corruption(path + " is not a spotguard trainer record");
  }
  TrainerRecord r;
  r.pid = j.value("pid", 0);
  r.pgid = j["pgid"].get<pid_t>();
  r.start_ticks = j["start_ticks"].get<uint64_t>();
  r.boot_id = j.value("boot_id", "");
  return r;
}

void RemoveTrainerRecord(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    LogWarn("removing {}: {}", path, std::strerror(errno));
  }
}

std::vector<pid_t> LiveMembers(const TrainerRecord& record) {
  std::vector<pid_t> out;
  if (record.pgid <= 1) return out;
  const std::string boot = BootId();
  if (!record.boot_id.empty() && !boot.empty() && record.boot_id != boot) return out;
  // While any member of a group lives, the kernel does not hand its id out
  // as a pid again. So a live process whose pid is the group id but that is
  // not the recorded leader means the recorded group ended long ago.
  if (auto leader = ReadProcStat(record.pgid); leader.ok() && leader->state != 'Z') {
    if (record.pid == record.pgid && leader->start_ticks != record.start_ticks) return out;
  }
  for (const ProcStat& p : ListProcesses()) {
    if (p.pgrp != record.pgid || p.state == 'Z' || p.pid == ::getpid()) continue;
    // A member started before the recorded trainer cannot be one of its own.
    if (p.start_ticks < record.start_ticks) continue;
    out.push_back(p.pid);
  }
  return out;
}

StatusOr<size_t> StopLeftoverTrainer(const std::string& checkpoint_dir, int stop_signal,
                                     milliseconds grace) {
  const std::string path = TrainerRecordPath(checkpoint_dir);
  auto record = ReadTrainerRecord(path);
  if (!record.ok()) {
    if (record.status().Is(StatusCode::kNotFound)) return size_t{0};
    LogWarn("ignoring {}: {}", path, record.status().message());
    RemoveTrainerRecord(path);
    return size_t{0};
  }
  const std::vector<pid_t> members = LiveMembers(*record);
  if (members.empty()) {
    RemoveTrainerRecord(path);
    return size_t{0};
  }
  LogWarn(
      "a trainer left behind by an earlier agent still runs in checkpoint_dir {}: process group "
      "{} (processes {}); stopping it with {} before starting a new trainer",
      checkpoint_dir, record->pgid, PidList(members), SignalName(stop_signal));
  if (::kill(-record->pgid, stop_signal) != 0 && errno != ESRCH) {
    return Status::FromErrno(errno, "kill process group " + std::to_string(record->pgid));
  }
  if (!WaitUntilEmpty(*record, grace)) {
    LogWarn("the left-behind trainer group {} did not stop within {:.1f} s of {}; killing it",
            record->pgid, std::chrono::duration<double>(grace).count(), SignalName(stop_signal));
    if (::kill(-record->pgid, SIGKILL) != 0 && errno != ESRCH) {
      return Status::FromErrno(errno, "kill process group " + std::to_string(record->pgid));
    }
    if (!WaitUntilEmpty(*record, milliseconds(10'000))) {
      return Status::IOError("the left-behind trainer group " + std::to_string(record->pgid) +
                             " in checkpoint_dir " + checkpoint_dir +
                             " survived SIGKILL: processes " + PidList(LiveMembers(*record)));
    }
  }
  LogInfo("stopped the left-behind trainer group {} ({} processes)", record->pgid, members.size());
  RemoveTrainerRecord(path);
  return members.size();
}

}  // namespace sg
