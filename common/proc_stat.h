// What /proc says about processes on this host: enough to tell one process
// incarnation from a later one that reuses its pid (pid + start time + boot
// id), and to find the members of a process group.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace sg {

struct ProcStat {
  pid_t pid = 0;
  char state = '?';  // 'R', 'S', 'Z', ... (field 3 of /proc/PID/stat)
  pid_t ppid = 0;
  pid_t pgrp = 0;
  // Field 22: clock ticks after boot when the process started. With the boot
  // id it names one process incarnation: a reused pid starts later.
  uint64_t start_ticks = 0;
};

// /proc/PID/stat parsed. NotFound when no such process exists (any more).
StatusOr<ProcStat> ReadProcStat(pid_t pid);

// /proc/sys/kernel/random/boot_id, or "" when it cannot be read.
std::string BootId();

// Every process /proc lists now (those that vanish while listed are skipped).
std::vector<ProcStat> ListProcesses();

}  // namespace sg
