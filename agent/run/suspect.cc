#include "agent/run/suspect.h"

#include <algorithm>
#include <filesystem>

#include "agent/detect/checkpoint_watcher.h"
#include "agent/run/local_checkpoint.h"
#include "agent/detect/presets.h"
#include "agent/repo/repository.h"
#include "common/log.h"
#include "common/strings.h"

namespace sg {
namespace {

namespace fs = std::filesystem;

// A dir beside the checkpoint dir that does not exist yet.
std::string SetAsideDir(const std::string& checkpoint_dir, uint64_t seq) {
  const std::string base = checkpoint_dir + ".spotguard-suspect-" + SeqName(seq);
  std::string dir = base;
  std::error_code ec;
  for (int n = 2; fs::exists(dir, ec); ++n) dir = base + "-" + std::to_string(n);
  return dir;
}

// Moves `checkpoint`'s files out of the checkpoint dir into a new dir beside
// it, at the same relative paths; empty dirs it leaves are removed.
StatusOr<std::string> MoveAside(const std::string& checkpoint_dir, const Checkpoint& checkpoint,
                                uint64_t seq) {
  const std::string to = SetAsideDir(checkpoint_dir, seq);
  for (const std::string& rel : checkpoint.relpaths) {
    const fs::path from = fs::path(checkpoint_dir) / rel;
    const fs::path dest = fs::path(to) / rel;
    std::error_code ec;
    fs::create_directories(dest.parent_path(), ec);
    if (ec) return Status::IOError("create " + dest.parent_path().string() + ": " + ec.message());
    fs::rename(from, dest, ec);
    if (ec) return Status::IOError("move " + from.string() + " aside: " + ec.message());
    for (fs::path dir = from.parent_path(); dir != fs::path(checkpoint_dir);
         dir = dir.parent_path()) {
      if (!fs::remove(dir, ec)) break;  // not empty (or gone): stop climbing
    }
  }
  return to;
}

}  // namespace

nlohmann::ordered_json SuspectRecord::ToJson() const {
  return {{"seq", seq},     {"time", time},   {"instance", instance},
          {"resume", resume}, {"exits", exits}, {"last_lines", last_lines}};
}

Status MarkSuspect(ObjectStore& store, const std::string& job, const SuspectRecord& record) {
  return Repository::Open(store, job).MarkSuspect(record.seq, record.ToJson().dump(2) + "\n");
}

Status ClearSuspect(ObjectStore& store, const std::string& job, uint64_t seq) {
  return Repository::Open(store, job).ClearSuspect(seq);
}

Status SetAsideSuspect(const Config& config, Clock& clock, SnapshotHistory& history) {
  if (history.suspect.empty()) return Status::Ok();
  std::vector<Manifest> suspect;
  std::erase_if(history.entries, [&](const SnapshotHistory::Entry& e) {
    if (!history.IsSuspect(e.seq)) return false;
    LogWarn(
        "snapshot {} is marked suspect (the trainer could not resume from it); resuming from an "
        "older one (`spotguard unsuspect {}` clears the mark)",
        SeqName(e.seq), e.seq);
    if (e.manifest.ok()) suspect.push_back(*e.manifest);
    return true;
  });
  const CheckpointDetector detector = CheckpointDetector::ForConfig(config);
  // Each pass sets one local checkpoint aside; the next newest may be
  // another suspect one.
  for (size_t pass = 0; pass <= suspect.size(); ++pass) {
    // No trainer runs now: whatever is there is as complete as it gets, and
    // a torn copy of a suspect checkpoint is set aside as well.
    auto local = DetectSettledNow(detector, std::chrono::nanoseconds(0), clock);
    if (!local.ok() || local->empty()) return Status::Ok();
    const Checkpoint& newest = local->front();
    // A later good snapshot of the same step (the trainer got there again
    // from an older one) makes it that one's copy, not the suspect's.
    auto good_later = [&](const Manifest& m) {
      return std::any_of(history.entries.begin(), history.entries.end(), [&](const auto& e) {
        return e.seq > m.seq && e.manifest.ok() && newest.step && e.manifest->step == newest.step;
      });
    };
    const auto match = std::find_if(suspect.begin(), suspect.end(), [&](const Manifest& m) {
      return !good_later(m) && CompareLocalCheckpoint(config.checkpoint_dir, newest, {m}).standing ==
                                   LocalStanding::kInStore;
    });
    if (match == suspect.end()) return Status::Ok();
    SG_ASSIGN_OR_RETURN(std::string to, MoveAside(config.checkpoint_dir, newest, match->seq));
    LogWarn(
        "the local checkpoint {} is suspect snapshot {}: moved it to {} (kept, never deleted) "
        "so the trainer does not resume from it",
        newest.id, SeqName(match->seq), to);
  }
  return Status::Ok();
}

StatusOr<StartPoint> FallBackFromSuspect(ObjectStore& store, Clock& clock, const Config& config,
                                         EventLog& events, const SuspectRecord& record) {
  SG_RETURN_IF_ERROR(MarkSuspect(store, config.job, record));
  LogError(
      "the trainer failed {} times after resuming from snapshot {} and wrote no newer "
      "checkpoint ({}): marked the snapshot suspect; falling back to the newest snapshot that "
      "is not",
      record.exits.size(), SeqName(record.seq), Join(record.exits, ", "));
  events.Note("suspect", record.ToJson());
  return RestoreAtStart(store, clock, config, events);
}

}  // namespace sg
