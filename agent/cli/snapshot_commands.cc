// `spotguard snapshot | restore | ls | gc` (agent/cli/snapshot_commands.h):
// the snapshot data path used by hand; `verify` is agent/cli/verify_command.cc's.
#include "agent/cli/snapshot_commands.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>

#include "agent/cli/group_commands.h"
#include "agent/config/exit_codes.h"
#include "agent/detect/capture.h"
#include "agent/detect/checkpoint_watcher.h"
#include "agent/detect/presets.h"
#include "agent/logs/log_store.h"
#include "agent/repo/fencing.h"
#include "agent/repo/group_retention.h"
#include "agent/repo/progress.h"
#include "agent/repo/quarantine.h"
#include "agent/repo/restore_placement.h"
#include "agent/repo/restorer.h"
#include "agent/repo/retention.h"
#include "agent/repo/repository.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/snapshot_writer.h"
#include "agent/repo/store_names.h"
#include "common/log.h"

namespace sg {
namespace {

int Fail(std::string_view command, const Status& st, int code = kExitFailure) {
  std::cerr << "spotguard " << command << ": " << st.message() << "\n";
  return code;
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// The files of an explicit snapshot: every regular file below `dir`, or the
// FILE arguments (named relative to the checkpoint dir when inside it).
// Maps each relpath to the file it is read from.
StatusOr<std::map<std::string, std::string>> SourcesFor(const Config& config,
                                                        const SnapshotCommandArgs& args) {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> out;
  std::error_code ec;
  if (!args.dir.empty()) {
    const fs::path root = fs::absolute(args.dir, ec).lexically_normal();
    if (!fs::is_directory(root, ec))
      return Status::InvalidArgument(args.dir + " is not a directory");
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (it->is_symlink()) {
        LogWarn("skipping symlink {}: snapshots hold regular files only", it->path().string());
        continue;
      }
      if (!it->is_regular_file()) continue;
      out[fs::relative(it->path(), root).string()] = it->path().string();
    }
    if (ec) return Status::IOError("reading " + args.dir + ": " + ec.message());
    if (out.empty()) return Status::InvalidArgument(args.dir + " holds no files");
    return out;
  }
  for (const std::string& f : args.files) {
    const fs::path p = fs::absolute(f, ec).lexically_normal();
    if (!fs::is_regular_file(p, ec)) return Status::InvalidArgument(f + " is not a regular file");
    std::string rel = p.filename().string();
    if (!config.checkpoint_dir.empty()) {
      const std::string inside = fs::relative(p, config.checkpoint_dir, ec).string();
      if (!ec && !inside.empty() && !inside.starts_with("..")) rel = inside;
    }
    if (!out.emplace(rel, p.string()).second) {
      return Status::InvalidArgument("two files would both be " + rel);
    }
  }
  return out;
}

// `spotguard snapshot` with no files: the preset finds the newest complete
// checkpoint in checkpoint_dir; it is captured (hardlinked) and committed
// unless a snapshot of it, or of a later step, is already in the store.
int SnapshotNewestCheckpoint(const Config& config, ObjectStore& store) {
  const CheckpointDetector detector = CheckpointDetector::ForConfig(config);
  // A checkpoint written just before the command is waited for, not refused.
  auto found = DetectOnceSettled(detector, SettleTime(config), SystemClock());
  if (!found.ok()) return Fail("snapshot", found.status());
  if (found->empty()) {
    return Fail(
        "snapshot",
        Status::NotFound("no complete checkpoint in " + config.checkpoint_dir + " (preset " +
                         std::string(PresetName(config.preset)) + "; files settle for " +
                         FormatDuration(std::chrono::duration_cast<Duration>(SettleTime(config))) +
                         ")"));
  }
  const Checkpoint& newest = found->front();
  const Repository repo = Repository::Open(store, config.job);
  SnapshotCatalog catalog = repo.Catalog();
  if (auto committed = catalog.Committed(); committed.ok() && !committed->empty()) {
    auto m = catalog.ReadManifest(committed->front());
    if (m.ok() && m->step && newest.step && *m->step >= *newest.step) {
      std::cerr << "spotguard snapshot: checkpoint " << newest.id << " (step " << *newest.step
                << ") is already in snapshot " << SeqName(m->seq) << "\n";
      std::cout << SeqName(m->seq) << "\n";
      return kExitOk;
    }
  }
  auto staging = PrepareStagingRoot(config.checkpoint_dir, config.job);
  if (!staging.ok()) return Fail("snapshot", staging.status());
  auto capture = CapturedCheckpoint::Capture(config.checkpoint_dir, newest, *staging);
  if (!capture.ok()) return Fail("snapshot", capture.status());
  SnapshotRequest request;
  request.preset = std::string(PresetName(config.preset));
  request.instance = HostName();
  auto generation = LeaseGenerationNow(store, config.job);
  if (!generation.ok()) return Fail("snapshot", generation.status());
  request.generation = *generation;
  auto result = [&] {
    ProgressLine progress("snapshot", capture->total_bytes());
    return repo.Write(SystemClock(), SnapshotOptionsOf(config), *capture, request,
                      [&](uint64_t done) { progress.Update(done); });
  }();
  if (!result.ok()) return Fail("snapshot", result.status());
  LogInfo("snapshot {} of job {} committed: checkpoint {} (step {})", SeqName(result->seq),
          config.job, newest.id, newest.step ? std::to_string(*newest.step) : "-");
  std::cout << SeqName(result->seq) << "\n";
  return kExitOk;
}

}  // namespace

std::optional<uint64_t> ParseSeqArgument(const std::string& text) {
  if (text.empty() || text.size() > 10 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoull(text);
}

int RunSnapshotCommand(const Config& config, const Environment& env,
                       const SnapshotCommandArgs& args) {
  auto store = OpenStore(config, env, nullptr, StoreUse::kTransfer);
  if (!store.ok()) return Fail("snapshot", store.status());
  if (args.dir.empty() && args.files.empty()) {
    if (config.checkpoint_dir.empty()) {
      return Fail("snapshot",
                  Status::InvalidArgument("name what to capture (--dir DIR or FILE...), or set "
                                          "checkpoint_dir to take its newest complete checkpoint"),
                  kExitUsage);
    }
    return SnapshotNewestCheckpoint(config, **store);
  }
  auto sources = SourcesFor(config, args);
  if (!sources.ok()) return Fail("snapshot", sources.status(), kExitUsage);

  Checkpoint named;  // what the manifest says: resume from the file when it is one
  named.id = args.dir.empty() ? "files" : args.dir;
  named.resume = sources->size() == 1 ? sources->begin()->first : ".";
  auto capture = CapturedCheckpoint::InPlace(*sources, std::move(named));
  if (!capture.ok()) return Fail("snapshot", capture.status());
  const SnapshotOptions options = SnapshotOptionsOf(config);
  SnapshotRequest request;
  request.preset = std::string(PresetName(config.preset));
  request.instance = HostName();
  auto generation = LeaseGenerationNow(**store, config.job);
  if (!generation.ok()) return Fail("snapshot", generation.status());
  request.generation = *generation;

  const Repository repo = Repository::Open(**store, config.job);
  const auto start = std::chrono::steady_clock::now();
  StatusOr<SnapshotResult> result = [&] {
    ProgressLine progress("snapshot", capture->total_bytes());
    return repo.Write(SystemClock(), options, *capture, request,
                      [&](uint64_t done) { progress.Update(done); });
  }();
  if (!result.ok()) return Fail("snapshot", result.status());
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  LogInfo(
      "snapshot {} of job {} committed: {} files, {} stored as {} ({} new, {} reused) in {:.1f}s",
      SeqName(result->seq), config.job, result->manifest.files.size(), HumanBytes(result->bytes),
      HumanBytes(result->stored_bytes), HumanBytes(result->new_bytes),
      HumanBytes(result->reused_bytes), secs);
  auto gc = repo.Prune(SystemClock(), GcOptions{.keep = config.keep});
  if (!gc.ok())
    LogWarn("retention after snapshot {} failed: {}", SeqName(result->seq), gc.status().message());
  std::cout << SeqName(result->seq) << "\n";
  return kExitOk;
}

int RunRestoreCommand(const Config& config, const Environment& env,
                      const RestoreCommandArgs& args) {
  const std::string target = args.to.empty()
                                 ? config.checkpoint_dir
                                 : std::filesystem::absolute(args.to).lexically_normal().string();
  if (target.empty()) {
    return Fail("restore",
                Status::InvalidArgument("restore needs --to DIR or checkpoint_dir in the config"),
                kExitUsage);
  }
  auto store = OpenStore(config, env, nullptr, StoreUse::kTransfer, StoreAccess::kReadOnly);
  if (!store.ok()) return Fail("restore", store.status(), StoreOpenExitCode(store.status()));
  if (config.nodes > 1) {
    return RunGroupRestore(config, **store, args.seq, args.rank, target, args.force);
  }
  std::optional<ProgressLine> progress;
  RestoreOptions options;
  options.replace_foreign = args.force;
  options.on_start = [&](const Manifest& m) {
    progress.reset();
    progress.emplace("restore " + SeqName(m.seq), m.TotalSize());
  };
  auto result = Repository::Open(**store, config.job)
                    .Restore(options, target, args.seq, [&](uint64_t done) {
                      if (progress) progress->Update(done);
                    });
  progress.reset();
  if (!result.ok()) {
    const bool nothing = result.status().Is(StatusCode::kNotFound) && !args.seq;
    // Not "nothing to restore" (3, which a boot script takes for a fresh
    // start): the job's snapshots are a group's.
    const auto hint =
        nothing ? GroupSnapshotsHint(**store, config.job, "and --rank R to restore rank R's part")
                : std::nullopt;
    if (hint)
      return Fail("restore", Status::InvalidArgument("no single-node snapshot: " + *hint),
                  kExitUsage);
    return Fail("restore", result.status(),
                nothing                             ? kExitNothingToRestore
                : IsRestoreRefusal(result.status()) ? kExitUsage
                                                    : kExitFailure);
  }
  LogInfo("restored snapshot {} of job {} into {} ({}); kept {} entries that were there",
          SeqName(result->seq), config.job, result->dir, HumanBytes(result->bytes),
          result->kept_foreign);
  if (!result->backup_dir.empty()) {
    std::cerr << "spotguard restore: "
              << DescribeBackup(result->replaced, result->unsettled, result->dir,
                                result->backup_dir)
              << "\n";
  }
  std::cout << result->resume_path << "\n";
  return kExitOk;
}

int RunLsCommand(const Config& config, const Environment& env, bool json) {
  auto store = OpenStore(config, env, nullptr, StoreUse::kInteractive, StoreAccess::kReadOnly);
  if (!store.ok()) return Fail("ls", store.status(), StoreOpenExitCode(store.status()));
  if (config.nodes > 1) return RunGroupLs(config, **store, json);
  auto history = Repository::Open(**store, config.job).History();
  if (!history.ok()) return Fail("ls", history.status());
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  if (!json) {
    // INDEX and ATTEMPT: the engine's child and attempt that wrote it
    // (docs/agent.md), "-" outside an engine. Added last, so the columns
    // before them keep their places. NEW and REUSED split STORED: the bytes
    // the snapshot uploaded, and those it references in earlier snapshots'
    // objects (docs/design.md §4, "Frame reuse"). SUSPECT: the trainer
    // could not resume from it (agent/run/suspect.h). QUARANTINED: it needs
    // a quarantined object (docs/design.md §4, "Quarantine").
    std::printf("%-10s  %-24s  %5s  %10s  %10s  %-10s  %5s  %7s  %10s  %10s  %-7s  %s\n", "SEQ",
                "CREATED", "FILES", "SIZE", "STORED", "STEP", "INDEX", "ATTEMPT", "NEW", "REUSED",
                "SUSPECT", "QUARANTINED");
  }
  for (const SnapshotHistory::Entry& entry : history->entries) {
    const uint64_t seq = entry.seq;
    const StatusOr<Manifest>& m = entry.manifest;
    if (!m.ok()) {
      LogWarn("snapshot {}: {}", SeqName(seq), m.status().message());
      continue;
    }
    const std::vector<std::string> needs = QuarantinedReferences(*m, history->quarantined);
    if (json) {
      rows.push_back({{"seq", seq},
                      {"created", m->created},
                      {"files", m->files.size()},
                      {"size", m->TotalSize()},
                      {"stored_size", m->TotalStored()},
                      {"new_stored_size", m->NewStored()},
                      {"reused_stored_size", m->ReusedStored()},
                      {"step", m->step ? nlohmann::ordered_json(*m->step) : nullptr},
                      {"resume", m->resume},
                      {"instance", m->instance},
                      {"generation", m->generation},
                      {"index", m->index ? nlohmann::ordered_json(*m->index) : nullptr},
                      {"attempt", m->attempt ? nlohmann::ordered_json(*m->attempt) : nullptr},
                      {"suspect", history->IsSuspect(seq)},
                      {"quarantined", needs}});
    } else {
      auto or_dash = [](const std::optional<int64_t>& v) {
        return v ? std::to_string(*v) : std::string("-");
      };
      std::printf("%-10s  %-24s  %5zu  %10s  %10s  %-10s  %5s  %7s  %10s  %10s  %-7s  %s\n",
                  SeqName(seq).c_str(), m->created.c_str(), m->files.size(),
                  HumanBytes(m->TotalSize()).c_str(), HumanBytes(m->TotalStored()).c_str(),
                  or_dash(m->step).c_str(), or_dash(m->index).c_str(), or_dash(m->attempt).c_str(),
                  HumanBytes(m->NewStored()).c_str(), HumanBytes(m->ReusedStored()).c_str(),
                  history->IsSuspect(seq) ? "yes" : "-", needs.empty() ? "-" : "yes");
    }
  }
  if (json) std::cout << rows.dump(2) << "\n";
  if (history->entries.empty()) {
    if (auto hint = GroupSnapshotsHint(**store, config.job))
      std::cerr << "spotguard ls: " << *hint << "\n";
  }
  return kExitOk;
}

int RunGcCommand(const Config& config, const Environment& env,
                 std::optional<std::chrono::seconds> older_than, bool break_claims) {
  auto store = OpenStore(config, env, nullptr, StoreUse::kInteractive);
  if (!store.ok()) return Fail("gc", store.status());
  GcOptions options{.keep = config.keep, .break_claims = break_claims};
  if (older_than) options.abandoned_after = *older_than;
  const Repository repo = Repository::Open(**store, config.job);
  if (config.nodes > 1) {
    auto g = repo.PruneGroup(SystemClock(), options);
    if (!g.ok()) return Fail("gc", g.status());
    std::cout << "removed " << g->deleted.size() << " old group snapshots, " << g->parts_deleted
              << " parts no kept group snapshot needs, the records of " << g->rounds_deleted
              << " rounds and " << g->abandoned << " unfinished parts and uploads\n";
  }
  auto r = repo.Prune(SystemClock(), options);
  if (!r.ok()) return Fail("gc", r.status());
  std::cout << "removed " << r->deleted.size() << " old snapshots, " << r->abandoned.size()
            << " abandoned ones and " << r->stale_writes << " unfinished uploads\n";
  // The logs of attempts older than the newest logs_keep (docs/design.md §13).
  auto logs = PruneLogs(**store, config.job, config.logs_keep);
  if (!logs.ok()) return Fail("gc", logs.status());
  std::cout << "removed the logs of " << logs->attempts_removed.size() << " old attempts ("
            << logs->objects_deleted << " segments)\n";
  return kExitOk;
}

}  // namespace sg
