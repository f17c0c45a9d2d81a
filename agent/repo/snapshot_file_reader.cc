#include "agent/repo/snapshot_file_reader.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "agent/repo/snapshot_read_run.h"
#include "agent/repo/store_layout.h"
#include "common/bounded_executor.h"
#include "common/crypto.h"
#include "common/strings.h"

namespace sg {
namespace {

// Stored bytes per ranged read: 8 MiB, 16 MiB for files of 128 MiB stored
// and more (half the requests where there are many). A range's raw bytes
// are bounded too (kRawPerStored, agent/repo/snapshot_read_run.cc).
constexpr uint64_t kReadRange = 8ull << 20;
constexpr uint64_t kLargeReadRange = 16ull << 20;
constexpr uint64_t kLargeFile = 128ull << 20;
// Large files whose ranges are handed out in turn, so several are restored
// at once (and, in format 1, one's hash runs while another downloads).
constexpr size_t kFilesAtOnce = 4;

// Corruption naming every damaged file of snapshot `seq` (`damaged`: a
// reason per file, empty when it is good); OK when there is none.
Status SnapshotDamageStatus(uint64_t seq, std::vector<std::string>& damaged) {
  std::vector<std::string> bad;
  for (std::string& why : damaged) {
    if (!why.empty()) bad.push_back(std::move(why));
  }
  if (bad.empty()) return Status::Ok();
  return Status::Corruption("snapshot " + SeqName(seq) + " is damaged: " + Join(bad, "; "));
}

}  // namespace

std::vector<ReadRange> PlanReadRanges(const ManifestFile& file, uint64_t max_bytes,
                                      uint64_t max_raw) {
  if (max_raw == 0) max_raw = max_bytes;
  std::vector<ReadRange> ranges;
  size_t frame = 0;
  while (frame < file.frames.size()) {
    ReadRange r;
    r.first_frame = frame;
    r.key = file.frames[frame].key;
    r.offset = file.frames[frame].offset;
    while (frame < file.frames.size()) {
      const FrameRef& ref = file.frames[frame];
      const uint64_t raw = file.FrameRawSize(frame);
      if (frame > r.first_frame &&
          (ref.key != r.key || ref.offset != r.offset + r.stored ||
           r.stored + ref.stored > max_bytes || r.raw + raw > max_raw)) {
        break;
      }
      r.stored += ref.stored;
      r.raw += raw;
      ++frame;
    }
    r.end_frame = frame;
    ranges.push_back(std::move(r));
  }
  return ranges;
}

uint64_t ReadRangeBytes(const ManifestFile& file) {
  return file.stored_size >= kLargeFile ? kLargeReadRange : kReadRange;
}

bool HasFrameDigests(const ManifestFile& file) {
  return !file.frames.empty() &&
         std::all_of(file.frames.begin(), file.frames.end(),
                     [](const FrameRef& f) { return !f.sha256.empty(); });
}

bool IsDamage(const Status& st) {
  return st.Is(StatusCode::kCorruption) || st.Is(StatusCode::kNotFound) ||
         st.Is(StatusCode::kOutOfRange);
}

int DefaultParallelReads() {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::clamp(2u * cores, 4u, 8u));
}

SnapshotFileReader::SnapshotFileReader(ObjectStore& store, std::string job, int parallel_reads,
                                       const std::atomic<bool>* cancel)
    : store_(store),
      job_(std::move(job)),
      parallel_reads_(std::max(1, parallel_reads)),
      cancel_(cancel) {}

Status SnapshotFileReader::Read(const Manifest& manifest, const OpenFileSink& open,
                                const ProgressFn& progress) {
  return ReadAll(manifest, open, /*name_every_damaged_file=*/false, progress);
}

Status SnapshotFileReader::Verify(const Manifest& manifest, const ProgressFn& progress) {
  return ReadAll(manifest, nullptr, /*name_every_damaged_file=*/true, progress);
}

Status SnapshotFileReader::ReadAll(const Manifest& manifest, const OpenFileSink& open,
                                   bool name_every_damaged_file, const ProgressFn& progress) {
  using snapshot_read_detail::FileRead;
  using snapshot_read_detail::ReadRun;
  const size_t count = manifest.files.size();
  ReadRun run(store_, job_, open, name_every_damaged_file, progress, count, cancel_);
  std::deque<FileRead> files(count);
  Status st;
  {
    // Declared after `files`: its destructor waits for the tasks using them.
    BoundedExecutor workers(parallel_reads_, parallel_reads_);
    // Up to kFilesAtOnce files with several ranges get their ranges handed
    // out in turn; a file of one range (or read in order) is one task.
    std::deque<std::pair<FileRead*, size_t>> turn;  // file, next range
    size_t next = 0;
    // Files of one range back to back in one object, read together.
    std::vector<FileRead*> batch;
    std::string batch_key;
    uint64_t batch_start = 0, batch_end = 0;
    auto flush = [&]() -> Status {
      if (batch.empty()) return Status::Ok();
      Status submitted = workers.Submit([&run, b = std::move(batch)] { return run.ReadBatch(b); });
      batch.clear();
      return submitted;
    };
    while (st.ok()) {
      st = run.CheckCancel();
      while (st.ok() && turn.size() < kFilesAtOnce && next < count) {
        FileRead& fr = files[next];
        fr.file = &manifest.files[next];
        fr.index = next++;
        ReadRun::Plan(fr);
        const bool in_order = !open && !fr.frame_digests;
        if (fr.ranges.size() == 1) {
          // Joins the batch when it lies right after it in the same object.
          const sg::ReadRange& r = fr.ranges.front();
          const bool joins = !batch.empty() && r.key == batch_key && r.offset == batch_end &&
                             batch_end - batch_start + r.stored <= kReadRange;
          if (!joins) st = flush();
          if (batch.empty()) batch_key = r.key, batch_start = r.offset;
          batch.push_back(&fr);
          batch_end = r.offset + r.stored;
        } else if (fr.ranges.empty() || in_order) {
          FileRead* f = &fr;
          st = workers.Submit(
              [&run, f] { return run.Guard(*f, [&run, f] { return run.ReadInOrder(*f); }); });
        } else {
          turn.emplace_back(&fr, 0);
        }
      }
      if (turn.empty()) {
        if (st.ok()) st = flush();
        break;
      }
      // Plain variables, not a structured binding: clang 14 (the fuzz build)
      // cannot capture bindings in a lambda.
      FileRead* f = turn.front().first;
      size_t r = turn.front().second;
      turn.pop_front();
      st = workers.Submit([&run, f, r] {
        return run.Guard(*f, [&run, f, r] {
          SG_RETURN_IF_ERROR(run.ReadRange(*f, r, nullptr));
          return run.Written(*f, r);
        });
      });
      if (r + 1 < f->ranges.size()) turn.emplace_back(f, r + 1);
    }
    Status waited = workers.Wait();
    if (st.ok()) st = waited;
  }
  damaged_objects_ = run.DamagedObjects();
  SG_RETURN_IF_ERROR(st);
  return SnapshotDamageStatus(manifest.seq, run.damaged());
}

}  // namespace sg
