// `spotguard reset-failure` (docs/operations.md, docs/multi-node.md): clears
// the failure record of a job of several nodes (group/failed.json), so that
// its agents start it again. A single-node job keeps no failure record: its
// next `run` starts it again by itself.
#include <iostream>

#include "agent/ledger/events.h"
#include "agent/config/exit_codes.h"
#include "agent/repo/repository.h"
#include "agent/repo/group_store.h"
#include "agent/repo/open_store.h"

namespace sg {

int RunResetFailureCommand(const Config& config, const std::map<std::string, std::string>& env) {
  auto fail = [](const Status& st) {
    std::cerr << "spotguard reset-failure: " << st.message() << "\n";
    return kExitFailure;
  };
  if (config.nodes <= 1) {
    std::cout << "job " << config.job << " has nodes: 1 and keeps no failure record: its next "
              << "`spotguard run` starts it again; nothing to clear\n";
    return kExitOk;
  }
  auto store = OpenStore(config, env, nullptr, StoreUse::kInteractive);
  if (!store.ok()) return fail(store.status());
  GroupStore group = Repository::Open(**store, config.job).Group();
  auto failed = group.Failed();
  if (!failed.ok()) return fail(failed.status());
  if (!*failed) {
    std::cout << "job " << config.job << " has no failure record; nothing to clear\n";
    return kExitOk;
  }
  if (Status st = group.ClearFailure(); !st.ok()) return fail(st);
  EventLog events(**store, SystemClock(), config.job, /*instance=*/"");
  events.Note("failure-cleared", {{"why", (*failed)->why}, {"by", "reset-failure"}});
  std::cout << "cleared the failure of job " << config.job << " (" << (*failed)->why
            << "); its agents start it again from the newest group snapshot\n";
  return kExitOk;
}

}  // namespace sg
