// `spotguard unsuspect SEQ` (agent/run/suspect.h; agent/repo/group_suspect.h for a
// job of several nodes): clears the mark of a snapshot the trainer could not
// resume from, so the next start (or round) may resume from it.
#include <iostream>

#include "agent/config/exit_codes.h"
#include "agent/repo/group_suspect.h"
#include "agent/cli/snapshot_commands.h"
#include "agent/repo/store_names.h"
#include "agent/run/suspect.h"

namespace sg {

int RunUnsuspectCommand(const Config& config, const std::map<std::string, std::string>& env,
                        const std::string& seq_text) {
  const std::optional<uint64_t> seq = ParseSeqArgument(seq_text);
  if (!seq) {
    std::cerr << "spotguard unsuspect: \"" << seq_text
              << "\" is not a snapshot seq (digits, as `spotguard ls` shows them)\n";
    return kExitUsage;
  }
  auto store = OpenStore(config, env, nullptr, StoreUse::kInteractive);
  if (!store.ok()) {
    std::cerr << "spotguard unsuspect: " << store.status().message() << "\n";
    return kExitFailure;
  }
  // A job of several nodes marks its group snapshots (agent/repo/group_suspect.h).
  const bool group = config.nodes > 1;
  const std::string what = group ? "group snapshot " : "snapshot ";
  Status st = group ? ClearGroupSuspect(**store, config.job, *seq)
                    : ClearSuspect(**store, config.job, *seq);
  if (st.Is(StatusCode::kNotFound)) {
    std::cerr << "spotguard unsuspect: " << what << SeqName(*seq) << " of job " << config.job
              << " is not marked suspect\n";
    return kExitNothingToRestore;
  }
  if (!st.ok()) {
    std::cerr << "spotguard unsuspect: " << st.message() << "\n";
    return kExitFailure;
  }
  std::cout << what << SeqName(*seq) << " of job " << config.job
            << " is no longer suspect; the next " << (group ? "round" : "start")
            << " may resume from it\n";
  return kExitOk;
}

}  // namespace sg
