#include <malloc.h>

#include <map>
#include <string>
#include <vector>

#include "agent/cli/cli.h"
#include "common/log_queue.h"

extern char** environ;

// Snapshots and restores move 8 MiB buffers (frames, parts, ranges) through
// several threads. glibc's heap keeps such buffers after they are freed, in
// each thread's arena, and its dynamic mmap threshold grows past 8 MiB after
// the first one, so the peak RSS of an S3 transfer was 1.5x the documented
// bound (bench/RESULTS.md, "Memory"). Buffers of 1 MiB and more are mapped
// and handed back on free instead. A MALLOC_MMAP_THRESHOLD_ the user set wins.
static void BoundTheHeap(const std::map<std::string, std::string>& env) {
  if (env.count("MALLOC_MMAP_THRESHOLD_") == 0) ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
}

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  BoundTheHeap(env);
  const int code = sg::RunCli(args, env);
  // Lines still queued for stderr go out, unless stderr takes none for 2 s
  // (a reader that stopped): the exit never waits for it (common/log_queue.h).
  sg::FlushStderr();
  return code;
}
