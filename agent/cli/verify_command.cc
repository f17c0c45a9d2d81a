// `spotguard verify` (agent/cli/snapshot_commands.h): reads a snapshot back
// without writing it anywhere, checks every digest, quarantines the objects
// it finds damaged and names every quarantined object of the job
// (docs/design.md §4, "Quarantine").
#include <algorithm>
#include <iostream>
#include <set>

#include "agent/cli/group_commands.h"
#include "agent/cli/snapshot_commands.h"
#include "agent/config/exit_codes.h"
#include "agent/repo/progress.h"
#include "agent/repo/quarantine.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/snapshot_file_reader.h"
#include "agent/repo/store_layout.h"
#include "common/strings.h"

namespace sg {
namespace {

int VerifyFailed(const Status& st, int code = kExitFailure) {
  std::cerr << "spotguard verify: " << st.message() << "\n";
  return code;
}

// One line on stdout per quarantined object of the job: those this verify
// found (`found`), and those there already, saying which ones snapshot
// `seq` needs (`needed`).
void PrintQuarantined(uint64_t seq, const std::set<std::string>& earlier,
                      const std::vector<std::string>& found,
                      const std::vector<std::string>& needed) {
  std::set<std::string> all = earlier;
  all.insert(found.begin(), found.end());
  for (const std::string& key : all) {
    std::cout << "quarantined " << key;
    if (!earlier.contains(key)) {
      std::cout << ": found damaged now, in snapshot " << SeqName(seq);
    } else if (std::find(needed.begin(), needed.end(), key) != needed.end()) {
      std::cout << ": needed by snapshot " << SeqName(seq);
    }
    std::cout << "\n";
  }
}

}  // namespace

int RunVerifyCommand(const Config& config, const Environment& env, std::optional<uint64_t> seq) {
  auto store = OpenStore(config, env, nullptr, StoreUse::kInteractive, StoreAccess::kReadOnly);
  if (!store.ok()) return VerifyFailed(store.status(), StoreOpenExitCode(store.status()));
  if (config.nodes > 1) return RunGroupVerify(config, **store, seq);
  SnapshotCatalog catalog(**store, config.job);
  std::set<std::string> quarantined;
  auto committed = catalog.CommittedAndQuarantined(quarantined);
  if (!committed.ok()) return VerifyFailed(committed.status());
  if (!seq) {
    if (committed->empty()) {
      return VerifyFailed(Status::NotFound("the store has no snapshot of job " + config.job),
                          kExitNothingToRestore);
    }
    seq = committed->front();
  }
  auto manifest = catalog.ReadManifest(*seq);
  if (!manifest.ok()) return VerifyFailed(manifest.status());
  SnapshotFileReader reader(**store, config.job);
  Status st;
  {
    ProgressLine progress("verify", manifest->TotalSize());
    st = reader.Verify(*manifest, [&](uint64_t done) { progress.Update(done); });
  }
  const std::vector<std::string> found =
      QuarantineDamaged(**store, config.job, reader, st, "verify", *seq);
  const std::vector<std::string> needed = QuarantinedReferences(*manifest, quarantined);
  PrintQuarantined(*seq, quarantined, found, needed);
  if (!st.ok()) return VerifyFailed(st);
  if (!needed.empty()) {
    // Its frames read back whole (the damage lies in frames it does not
    // use), but a restore without a seq passes over it.
    return VerifyFailed(Status::Corruption(
        "snapshot " + SeqName(*seq) + " reads back whole but needs the quarantined object(s) " +
        Join(needed, ", ") + ": a restore without --snapshot passes over it"));
  }
  std::cout << "snapshot " << SeqName(*seq) << ": " << manifest->files.size() << " files, "
            << HumanBytes(manifest->TotalSize()) << ", every checksum matches\n";
  return kExitOk;
}

}  // namespace sg
