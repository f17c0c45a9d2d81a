#include "common/proc_stat.h"

#include <dirent.h>

#include <cstdlib>
#include <sstream>

#include "common/files.h"

namespace sg {

StatusOr<ProcStat> ReadProcStat(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  auto text = ReadFileToString(path);
  // The file is world-readable while the process exists; failing to open or
  // read it (ENOENT, ESRCH while it exits) means it is gone.
  if (!text.ok()) return Status::NotFound("no process " + std::to_string(pid));
  // The command name (field 2) is in parentheses and may hold spaces or
  // parentheses itself: the fields after it start after the LAST ')'.
  const size_t paren = text->rfind(')');
  if (paren == std::string::npos || paren + 2 >= text->size()) {
    return Status::Corruption("cannot parse " + path);
  }
  std::istringstream in(text->substr(paren + 2));
  ProcStat s;
  s.pid = pid;
  in >> s.state >> s.ppid >> s.pgrp;
  std::string skip;
  for (int field = 6; field < 22 && in; ++field) in >> skip;  // fields 6..21
  in >> s.start_ticks;
  if (!in) return Status::Corruption("cannot parse " + path);
  return s;
}

std::string BootId() {
  auto text = ReadFileToString("/proc/sys/kernel/random/boot_id");
  if (!text.ok()) return "";
  std::string id = *text;
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

std::vector<ProcStat> ListProcesses() {
  std::vector<ProcStat> out;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0) continue;
    auto st = ReadProcStat(static_cast<pid_t>(pid));
    if (st.ok()) out.push_back(*st);
  }
  ::closedir(dir);
  return out;
}

}  // namespace sg
