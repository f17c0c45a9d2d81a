// `spotguard snapshot | restore | ls | verify | gc`: the snapshot data path
// used by hand. Each returns the process exit code and prints its result on
// stdout (errors on stderr).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/repo/open_store.h"

namespace sg {

struct SnapshotCommandArgs {
  std::string dir;                 // --dir
  std::vector<std::string> files;  // FILE...
};
int RunSnapshotCommand(const Config& config, const Environment& env,
                       const SnapshotCommandArgs& args);

struct RestoreCommandArgs {
  std::optional<uint64_t> seq;  // --snapshot
  std::string to;               // --to
  bool force = false;           // --force: foreign files of the same name go to a backup dir
  std::optional<int> rank;      // --rank: a group snapshot's part (nodes > 1)
};
int RunRestoreCommand(const Config& config, const Environment& env, const RestoreCommandArgs& args);

int RunLsCommand(const Config& config, const Environment& env, bool json);
int RunVerifyCommand(const Config& config, const Environment& env, std::optional<uint64_t> seq);
// `older_than` (gc --older-than) replaces the hour after which unfinished
// snapshot dirs and multipart uploads count as abandoned; a writer whose
// claim is live (renewed within 10 minutes) is never taken for dead by age.
// `break_claims` (gc --break-claims) takes every writer for dead: only safe
// when no agent of the job is writing (e.g. after a crash, or in tests).
int RunGcCommand(const Config& config, const Environment& env,
                 std::optional<std::chrono::seconds> older_than = std::nullopt,
                 bool break_claims = false);

// "42" or "0000000042".
std::optional<uint64_t> ParseSeqArgument(const std::string& text);

}  // namespace sg
