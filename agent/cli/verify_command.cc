// `spotguard verify` (agent/cli/snapshot_commands.h): reads a snapshot back
// without writing it anywhere, checks every digest, quarantines the objects
// it finds damaged and names every quarantined object of the job
// (docs/design.md §4, "Quarantine").
#include <algorithm>
#include <iostream>
#include <set>
#include <string_view>

#include "agent/cli/group_commands.h"
#include "agent/cli/snapshot_commands.h"
#include "agent/config/exit_codes.h"
#include "agent/repo/group_quarantine.h"
#include "agent/repo/group_store.h"
#include "agent/repo/progress.h"
#include "agent/repo/quarantine.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/snapshot_file_reader.h"
#include "agent/repo/repository.h"
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
// `what`: "snapshot", or "group snapshot" (whose keys are relative to
// "<job>/": "nodes/<rank>/...").
void PrintQuarantined(uint64_t seq, const std::set<std::string>& earlier,
                      const std::vector<std::string>& found, const std::vector<std::string>& needed,
                      std::string_view what = "snapshot") {
  std::set<std::string> all = earlier;
  all.insert(found.begin(), found.end());
  for (const std::string& key : all) {
    std::cout << "quarantined " << key;
    if (!earlier.contains(key)) {
      std::cout << ": found damaged now, in " << what << " " << SeqName(seq);
    } else if (std::find(needed.begin(), needed.end(), key) != needed.end()) {
      std::cout << ": needed by " << what << " " << SeqName(seq);
    }
    std::cout << "\n";
  }
}

// Reads back every part of group snapshot `g`: the files and bytes checked,
// the damage found by rank, and into `found` the objects it quarantined
// (relative to "<job>/").
Status VerifyParts(const Config& config, ObjectStore& store, const GroupCommit& g, uint64_t& files,
                   uint64_t& bytes, std::vector<std::string>& found) {
  std::vector<std::string> bad;
  for (const PartRecord& p : g.parts) {
    const Repository part = Repository::Open(store, config.job).Part(p.rank);
    auto manifest = part.Catalog().ReadManifest(p.seq);
    Status st = manifest.status();
    if (st.ok()) {
      ProgressLine progress("verify rank " + std::to_string(p.rank), manifest->TotalSize());
      // In the rank's part job (docs/design.md §14, "Quarantine in a group").
      const Repository::Verified v =
          part.Verify(*manifest, [&](uint64_t done) { progress.Update(done); });
      st = v.status;
      for (const std::string& key : v.quarantined) {
        found.push_back(Repository::PartRelativeKey(p.rank, key));
      }
      files += manifest->files.size();
      bytes += manifest->TotalSize();
    }
    if (!st.ok()) bad.push_back("rank " + std::to_string(p.rank) + ": " + st.message());
  }
  return bad.empty() ? Status::Ok() : Status::Corruption(Join(bad, "; "));
}

}  // namespace

int RunGroupVerify(const Config& config, ObjectStore& store, std::optional<uint64_t> seq) {
  auto listing = Repository::Open(store, config.job).Group().ListGroups();
  if (!listing.ok()) return VerifyFailed(listing.status());
  // Damaged group snapshot records are named; the newest readable one is
  // still checked.
  std::vector<std::string> unreadable;
  for (const UnreadableRecord& u : listing->unreadable) {
    unreadable.push_back("cannot read " + u.key + ": " + u.why);
  }
  std::optional<GroupCommit> g = FindGroup(listing->groups, seq);
  if (!g && !unreadable.empty()) return VerifyFailed(Status::Corruption(Join(unreadable, "; ")));
  if (!g) {
    return VerifyFailed(
        Status::NotFound(seq ? "job " + config.job + " has no group snapshot " + SeqName(*seq)
                             : "the store has no group snapshot of job " + config.job),
        kExitNothingToRestore);
  }
  auto quarantine = ReadGroupQuarantine(store, config.job, {*g});
  if (!quarantine.ok()) return VerifyFailed(quarantine.status());
  uint64_t files = 0, bytes = 0;
  std::vector<std::string> found;
  const Status st = VerifyParts(config, store, *g, files, bytes, found);
  const std::vector<std::string> all = quarantine->AllKeys();
  const auto it = quarantine->needs.find(g->seq);
  const std::vector<std::string> needed =
      it == quarantine->needs.end() ? std::vector<std::string>{} : it->second;
  PrintQuarantined(g->seq, {all.begin(), all.end()}, found, needed, "group snapshot");
  if (!st.ok()) {
    std::vector<std::string> why = {st.message()};
    why.insert(why.end(), unreadable.begin(), unreadable.end());
    return VerifyFailed(Status::Corruption("group snapshot " + SeqName(g->seq) +
                                           " is damaged: " + Join(why, "; ")));
  }
  if (!needed.empty()) {
    return VerifyFailed(Status::Corruption(
        "group snapshot " + SeqName(g->seq) +
        " reads back whole but needs the quarantined object(s) " + Join(needed, ", ") +
        ": no round resumes from it, and `restore --rank` without --snapshot passes over it"));
  }
  // The snapshot checked is whole; records elsewhere that cannot be read
  // are named apart, and still fail the command.
  std::cout << "group snapshot " << SeqName(g->seq) << ": " << g->nodes << " nodes, " << files
            << " files, " << HumanBytes(bytes) << ", every checksum matches\n";
  if (!unreadable.empty()) {
    return VerifyFailed(
        Status::Corruption("other group records are damaged: " + Join(unreadable, "; ")));
  }
  return kExitOk;
}

int RunVerifyCommand(const Config& config, const Environment& env, std::optional<uint64_t> seq) {
  auto store = OpenStore(config, env, nullptr, StoreUse::kInteractive, StoreAccess::kReadOnly);
  if (!store.ok()) return VerifyFailed(store.status(), StoreOpenExitCode(store.status()));
  if (config.nodes > 1) return RunGroupVerify(config, **store, seq);
  const Repository repo = Repository::Open(**store, config.job);
  SnapshotCatalog catalog = repo.Catalog();
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
  Repository::Verified verified;
  {
    ProgressLine progress("verify", manifest->TotalSize());
    verified = repo.Verify(*manifest, [&](uint64_t done) { progress.Update(done); });
  }
  const Status& st = verified.status;
  const std::vector<std::string>& found = verified.quarantined;
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
