// Restore at `run`'s start (agent/run/job_start.h; docs/design.md §8): a
// local checkpoint the store lacks is never thrown away; else the newest
// good snapshot of the history the start listed is restored.
#include <chrono>
#include <filesystem>
#include <utility>

#include "agent/detect/checkpoint_watcher.h"
#include "agent/repo/progress.h"
#include "agent/repo/quarantine.h"
#include "agent/repo/repository.h"
#include "agent/repo/round_backups.h"
#include "agent/run/job_start.h"
#include "agent/run/local_checkpoint.h"
#include "agent/run/suspect.h"
#include "common/log.h"

namespace sg {
namespace {

double SecondsSince(Clock& clock, Clock::MonoTime t) {
  return std::chrono::duration<double>(clock.Monotonic() - t).count();
}

// The start from a local checkpoint that is not older than the store's
// newest; nullopt when there is none, and the store's is restored.
std::optional<StartPoint> ResumeFromLocal(Clock& clock, const Config& config, EventLog& events,
                                          const SnapshotHistory& history) {
  const CheckpointDetector detector = CheckpointDetector::ForConfig(config);
  auto local = DetectSettledNow(detector, SettleTime(config), clock);
  if (!local.ok() || local->empty()) return std::nullopt;
  const Checkpoint& l = local->front();
  const LocalComparison cmp = CompareLocalCheckpoint(config.checkpoint_dir, l, history.Readable());
  if (cmp.standing == LocalStanding::kOlder) {
    LogInfo("the local checkpoint {} is older than the store's ({}); restoring", l.id, cmp.why);
    return std::nullopt;
  }
  StartPoint sp;
  RestoredState& s = sp.state;
  sp.resumed_step = l.step;
  s.resume = config.checkpoint_dir + "/" + l.resume;
  if (cmp.standing == LocalStanding::kInStore) {
    LogInfo("the local checkpoint {} is already in the store ({}); resuming from it", l.id,
            cmp.why);
    s.committed = CheckpointMark::Of(l);
    s.committed_step = l.step;
    s.last_seq = cmp.seq;
  } else {
    LogWarn(
        "the local checkpoint {} is not in the store ({}); resuming from it and uploading it "
        "first",
        l.id, cmp.why);
    s.upload_first = true;
  }
  events.Note("resume-local", {{"checkpoint", l.id}, {"why", cmp.why}});
  return sp;
}

// The start of a job with no single-node snapshot: fresh, unless the job
// is a group's. A job trained by several nodes keeps its snapshots per
// rank, under groups/: starting it fresh on one node would silently drop
// them.
StatusOr<StartPoint> StartFresh(ObjectStore& store, const Config& config) {
  SG_ASSIGN_OR_RETURN(std::vector<GroupCommit> groups,
                      Repository::Open(store, config.job).Group().Groups());
  if (!groups.empty()) {
    const GroupCommit& newest = groups.back();
    return Status::InvalidArgument(Format(
        "job {} holds group snapshots made by {} nodes (the newest: {}, step {}) and no "
        "single-node snapshot, and this config says nodes: 1; run it with nodes: {}, or start "
        "the job under another name",
        config.job, newest.nodes, SeqName(newest.seq), newest.step, newest.nodes));
  }
  LogInfo("no snapshot of job {} yet: starting fresh", config.job);
  return StartPoint{};
}

}  // namespace

StatusOr<StartPoint> RestoreAtStart(ObjectStore& store, Clock& clock, const Config& config,
                                    EventLog& events, const std::atomic<bool>* cancel,
                                    std::optional<SnapshotHistory> listed) {
  StartPoint sp;
  RestoredState& s = sp.state;
  const auto start = clock.Monotonic();
  // One listing of the history, for the fence, the comparison and the restore.
  if (!listed) {
    SG_ASSIGN_OR_RETURN(listed, Repository::Open(store, config.job).History());
  }
  SnapshotHistory history = std::move(*listed);
  // Never from a snapshot the trainer could not resume from (agent/run/suspect.h).
  SG_RETURN_IF_ERROR(SetAsideSuspect(config, clock, history));
  std::error_code ec;
  std::filesystem::create_directories(config.checkpoint_dir, ec);
  // A local checkpoint the store does not hold (the agent restarted on the
  // same machine, the upload never finished) is never thrown away. Nor is
  // one whose snapshot needs a quarantined object: the store holds no good
  // copy of it, so it is uploaded first (docs/design.md §4, "Quarantine").
  if (std::optional<StartPoint> local =
          ResumeFromLocal(clock, config, events, WithoutQuarantined(history))) {
    return std::move(*local);
  }
  if (history.empty()) return StartFresh(store, config);
  // Files of the same name as the snapshot's that restore did not put there
  // are older than the snapshot (or local would have won above): they are
  // kept in a backup dir, never deleted. A snapshot that needs a
  // quarantined object is passed over, and one found damaged quarantined
  // (Restorer::RestoreNewest).
  RestoreOptions options;
  options.replace_foreign = true;
  options.cancel = cancel;
  options.on_start = [&](const Manifest& m) {
    LogInfo("restoring snapshot {} ({}, step {}) into {}", SeqName(m.seq),
            HumanBytes(m.TotalSize()), m.step ? std::to_string(*m.step) : "-",
            config.checkpoint_dir);
  };
  SG_ASSIGN_OR_RETURN(
      RestoreResult restored,
      Repository::Open(store, config.job).RestoreNewest(options, history, config.checkpoint_dir));
  const Manifest* manifest = history.Find(restored.seq);
  sp.restore_seconds = SecondsSince(clock, start);
  // After the timing: pruning older backups is not the restore's time.
  if (!restored.backup_dir.empty()) {
    KeepFewAgentBackups(
        config.checkpoint_dir, restored.backup_dir,
        "made by run's restore of snapshot " + SeqName(restored.seq) + " at its start",
        config.backups_keep);
  }
  if (manifest) {
    s.committed_step = manifest->step;
    sp.resumed_step = manifest->step;
  }
  // Restored files are not new work: only checkpoints written from now on are.
  s.committed = CheckpointMark{"", s.committed_step, clock.Now()};
  s.resume = restored.resume_path;
  s.last_seq = restored.seq;
  LogInfo(
      "restored snapshot {} ({}) in {:.1f} s, keeping {} entries that were there; resuming "
      "from {}",
      SeqName(restored.seq), HumanBytes(restored.bytes), sp.restore_seconds, restored.kept_foreign,
      s.resume);
  events.Note("restore", {{"seq", restored.seq},
                          {"seconds", sp.restore_seconds},
                          {"resume", restored.resume_path},
                          {"backup_dir", restored.backup_dir}});
  return sp;
}

}  // namespace sg
