#include "agent/snapshot_file_reader.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "agent/range_decoder.h"
#include "agent/store_layout.h"
#include "common/bounded_executor.h"
#include "common/crypto.h"
#include "common/spare_buffer.h"
#include "common/strings.h"

namespace sg {
namespace {

// Stored bytes per ranged read: 8 MiB, 16 MiB for files of 128 MiB stored
// and more (half the requests where there are many). A range's raw bytes
// are bounded at kRawPerStored times that: they are never held together,
// a worker decodes one frame at a time.
constexpr uint64_t kReadRange = 8ull << 20;
constexpr uint64_t kLargeReadRange = 16ull << 20;
constexpr uint64_t kLargeFile = 128ull << 20;
constexpr uint64_t kRawPerStored = 8;
// Large files whose ranges are handed out in turn, so several are restored
// at once (and, in format 1, one's hash runs while another downloads).
constexpr size_t kFilesAtOnce = 4;
// Read-back chunk for hashing a format 1 file.
constexpr uint64_t kReadBack = 1ull << 20;

// A worker's read-back buffer for hashing, kept across the ranges it reads.
std::string& ReadBackBuffer() {
  thread_local std::string back;
  return back;
}

Status FileError(const ManifestFile& f, StatusCode code, const std::string& what) {
  return Status(code, "file \"" + f.path + "\": " + what);
}

// One file being read: its ranges, its sink and how far it is.
struct FileRead {
  const ManifestFile* file = nullptr;
  size_t index = 0;
  std::vector<ReadRange> ranges;
  bool frame_digests = false;
  std::atomic<bool> failed{false};  // verify: already named as damaged

  std::mutex mu;
  bool opened = false;
  Status open_status;
  std::unique_ptr<FileSink> sink;
  size_t unwritten = 0;  // ranges not yet written
  // Format 1: the whole-file SHA-256, over ranges hashed in order as soon as
  // they are written, by whichever worker finds the next one ready.
  std::vector<char> written;
  size_t hashed = 0;
  bool hashing = false;
  std::unique_ptr<Sha256Stream> sha;
};

// One Read or Verify: every file's ranges on one pool of workers.
class ReadRun {
 public:
  ReadRun(ObjectStore& store, const std::string& job, const OpenFileSink& open, bool name_damage,
          const ProgressFn& progress, size_t file_count, const std::atomic<bool>* cancel)
      : store_(store), job_(job), open_(open), name_damage_(name_damage), progress_(progress),
        damaged_(file_count), cancel_(cancel) {}

  // Cancelled once the reader's cancel flag is set.
  Status CheckCancel() const {
    if (cancel_ && cancel_->load()) return Status::Cancelled("the restore was cancelled");
    return Status::Ok();
  }

  std::vector<std::string>& damaged() { return damaged_; }

  // Runs a task for `fr`, naming a damaged file instead of failing in verify.
  Status Guard(FileRead& fr, const std::function<Status()>& task) {
    if (fr.failed) return Status::Ok();
    SG_RETURN_IF_ERROR(CheckCancel());
    Status st = task();
    if (st.ok() || !name_damage_ || !IsDamage(st)) return st;
    if (!fr.failed.exchange(true)) damaged_[fr.index] = st.message();
    return Status::Ok();
  }

  // Reads range `r` and writes each frame at its place as soon as its bytes
  // are in (RangeDecoder), checking frame digests when there are;
  // `inline_sha` (verify of format 1, in order) hashes what is decoded.
  Status ReadRange(FileRead& fr, size_t r, Sha256Stream* inline_sha) {
    const sg::ReadRange& range = fr.ranges[r];
    SG_RETURN_IF_ERROR(Open(fr));
    RangeDecoder decoder(Target(fr, r, inline_sha));
    // The transport also calls with no bytes while it waits for them: a
    // cancel ends a read that stalls too.
    Status st = store_.GetTo(JobPrefix(job_) + range.key, ByteRange{range.offset, range.stored},
                             [this, &decoder](uint64_t at, std::string_view bytes) {
                               SG_RETURN_IF_ERROR(CheckCancel());
                               return bytes.empty() ? Status::Ok() : decoder.Feed(at, bytes);
                             });
    if (st.Is(StatusCode::kCancelled)) return st;
    if (!decoder.error().ok()) return decoder.error();  // as the decoder named it
    if (!st.ok()) return FileError(*fr.file, st.code(), st.message());
    return decoder.Finish();
  }

  // Files of one range each that lie back to back in one object (a pack):
  // one ranged read for all of them, then each file decoded, checked and
  // finished by itself, so a damaged one is named alone.
  Status ReadBatch(const std::vector<FileRead*>& batch) {
    SG_RETURN_IF_ERROR(CheckCancel());
    const sg::ReadRange& first = batch.front()->ranges.front();
    const sg::ReadRange& last = batch.back()->ranges.front();
    const uint64_t length = last.offset + last.stored - first.offset;
    auto stored = Fetch(*batch.front()->file, first.key, first.offset, length);
    for (FileRead* fr : batch) {
      SG_RETURN_IF_ERROR(Guard(*fr, [&]() -> Status {
        if (!stored.ok()) return FileError(*fr->file, stored.status().code(), stored.status().message());
        const sg::ReadRange& range = fr->ranges.front();
        return ReadInOrder(*fr, std::string_view(*stored).substr(range.offset - first.offset,
                                                                 range.stored));
      }));
    }
    if (stored.ok()) RecycleResponseBody(std::move(*stored));
    return Status::Ok();
  }

  // After range `r` is written: counts it, hashes what is now in order
  // (format 1) and finishes the file after its last range.
  Status Written(FileRead& fr, size_t r) {
    std::unique_lock<std::mutex> lock(fr.mu);
    --fr.unwritten;
    if (fr.frame_digests) {
      if (fr.unwritten > 0) return Status::Ok();
      lock.unlock();
      return Complete(fr, nullptr);
    }
    fr.written[r] = 1;
    if (fr.hashing) return Status::Ok();  // that worker will find this range too
    fr.hashing = true;
    while (fr.hashed < fr.ranges.size() && fr.written[fr.hashed]) {
      const sg::ReadRange& range = fr.ranges[fr.hashed];
      lock.unlock();
      Status st = HashBack(fr, range);
      lock.lock();
      if (!st.ok()) {
        fr.hashing = false;
        return st;
      }
      ++fr.hashed;
    }
    fr.hashing = false;
    if (fr.hashed < fr.ranges.size()) return Status::Ok();
    lock.unlock();
    return Complete(fr, fr.sha.get());
  }

  // A file read by one task, range after range: files of one range, verify
  // of a format 1 file (nothing written to hash back), files without frames.
  // `fetched`, when given, is the stored bytes of its only range.
  Status ReadInOrder(FileRead& fr, std::optional<std::string_view> fetched = std::nullopt) {
    SG_RETURN_IF_ERROR(Open(fr));
    Sha256Stream sha;
    Sha256Stream* inline_sha = fr.frame_digests ? nullptr : &sha;
    if (fetched) {
      SG_RETURN_IF_ERROR(WriteFrames(fr, 0, *fetched, inline_sha));
    } else {
      for (size_t r = 0; r < fr.ranges.size(); ++r) {
        SG_RETURN_IF_ERROR(ReadRange(fr, r, inline_sha));
      }
    }
    return Complete(fr, inline_sha);
  }

  static void Plan(FileRead& fr) {
    const ManifestFile& f = *fr.file;
    const uint64_t bytes = ReadRangeBytes(f);
    fr.ranges = PlanReadRanges(f, bytes, bytes * kRawPerStored);
    fr.frame_digests = HasFrameDigests(f);
    fr.unwritten = fr.ranges.size();
    fr.written.assign(fr.ranges.size(), 0);
    fr.sha = std::make_unique<Sha256Stream>();
  }

 private:
  Status Open(FileRead& fr) {
    std::lock_guard<std::mutex> lock(fr.mu);
    if (!fr.opened) {
      fr.opened = true;
      if (open_) {
        auto sink = open_(*fr.file);
        if (sink.ok()) {
          fr.sink = std::move(*sink);
        } else {
          fr.open_status = sink.status();
        }
      }
    }
    return fr.open_status;
  }

  StatusOr<std::string> Fetch(const ManifestFile& file, const std::string& key, uint64_t offset,
                              uint64_t length) {
    auto stored = store_.Get(JobPrefix(job_) + key, ByteRange{offset, length});
    if (!stored.ok()) return FileError(file, stored.status().code(), stored.status().message());
    if (stored->size() != length) {
      return FileError(file, StatusCode::kCorruption,
                       "object " + key + " is shorter than the manifest says");
    }
    return stored;
  }

  // Decodes the frames of range `r` from `stored`, all of it at hand.
  Status WriteFrames(FileRead& fr, size_t r, std::string_view stored, Sha256Stream* inline_sha) {
    RangeDecoder decoder(Target(fr, r, inline_sha));
    SG_RETURN_IF_ERROR(decoder.Feed(0, stored));
    return decoder.Finish();
  }

  RangeDecoder::Target Target(FileRead& fr, size_t r, Sha256Stream* inline_sha) {
    RangeDecoder::Target t;
    t.file = fr.file;
    t.range = &fr.ranges[r];
    t.sink = fr.sink.get();
    t.frame_digests = fr.frame_digests;
    t.thorough = name_damage_;
    t.inline_sha = inline_sha;
    t.written = [this](uint64_t n) { Report(n); };
    return t;
  }

  Status HashBack(FileRead& fr, const sg::ReadRange& range) {
    std::string& back = ReadBackBuffer();
    const uint64_t begin = range.first_frame * fr.file->frame_size;
    for (uint64_t at = begin; at < begin + range.raw; at += kReadBack) {
      const uint64_t n = std::min(kReadBack, begin + range.raw - at);
      SG_RETURN_IF_ERROR(fr.sink->ReadAt(at, n, &back));
      fr.sha->Update(back);
    }
    return Status::Ok();
  }

  // Checks the whole-file SHA-256 (`sha`, format 1) and finishes the sink.
  Status Complete(FileRead& fr, Sha256Stream* sha) {
    const ManifestFile& file = *fr.file;
    // A file of one frame has the frame's digest as its own: the whole-file
    // SHA-256 is checked too, for free. (Longer files with frame digests are
    // covered frame by frame; their whole-file SHA-256 is not recomputed.)
    const bool one_frame_differs = fr.frame_digests && file.frames.size() == 1 &&
                                   file.frames[0].sha256 != file.sha256;
    if (one_frame_differs || (sha && sha->FinishHex() != file.sha256)) {
      return FileError(file, StatusCode::kCorruption,
                       "SHA-256 does not match (object " + file.key + " is damaged)");
    }
    std::unique_ptr<FileSink> sink;
    {
      std::lock_guard<std::mutex> lock(fr.mu);
      sink = std::move(fr.sink);
    }
    if (!sink) return Status::Ok();
    return sink->Finish();  // closed here: only the files being read are open
  }

  void Report(uint64_t n) {
    const uint64_t total = done_ += n;
    if (progress_) {
      std::lock_guard<std::mutex> lock(progress_mu_);
      progress_(total);
    }
  }

  ObjectStore& store_;
  const std::string& job_;
  const OpenFileSink& open_;
  // Verify: every damaged file is named, and every digest (and zstd's own
  // checksum) is checked.
  const bool name_damage_;
  const ProgressFn& progress_;
  std::vector<std::string> damaged_;
  const std::atomic<bool>* const cancel_;
  std::atomic<uint64_t> done_{0};
  std::mutex progress_mu_;
};

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
  SG_RETURN_IF_ERROR(st);
  std::vector<std::string> bad;
  for (std::string& why : run.damaged()) {
    if (!why.empty()) bad.push_back(std::move(why));
  }
  if (bad.empty()) return Status::Ok();
  return Status::Corruption("snapshot " + SeqName(manifest.seq) +
                            " is damaged: " + Join(bad, "; "));
}

}  // namespace sg
