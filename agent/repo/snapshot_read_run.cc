// What one worker of a snapshot read does with a range or a file
// (docs/design.md §7, docs/format.md "Checks on restore"): ReadRun of
// agent/repo/snapshot_read_run.h.
#include "agent/repo/snapshot_read_run.h"

#include <algorithm>

#include "agent/repo/store_layout.h"
#include "common/spare_buffer.h"

namespace sg::snapshot_read_detail {
namespace {

// A range's raw bytes are bounded at kRawPerStored times its stored bytes:
// they are never held together, a worker decodes one frame at a time.
constexpr uint64_t kRawPerStored = 8;
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

}  // namespace

Status ReadRun::Guard(FileRead& fr, const std::function<Status()>& task) {
  if (fr.failed) return Status::Ok();
  SG_RETURN_IF_ERROR(CheckCancel());
  Status st = task();
  if (st.ok() || !name_damage_ || !IsDamage(st)) return st;
  if (!fr.failed.exchange(true)) damaged_[fr.index] = st.message();
  return Status::Ok();
}

Status ReadRun::ReadRange(FileRead& fr, size_t r, Sha256Stream* inline_sha) {
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
  // As the decoder named it.
  if (!decoder.error().ok()) return NoteDamage(range.key, decoder.error());
  if (!st.ok()) return NoteDamage(range.key, FileError(*fr.file, st.code(), st.message()));
  return NoteDamage(range.key, decoder.Finish());
}

Status ReadRun::ReadBatch(const std::vector<FileRead*>& batch) {
  SG_RETURN_IF_ERROR(CheckCancel());
  const sg::ReadRange& first = batch.front()->ranges.front();
  const sg::ReadRange& last = batch.back()->ranges.front();
  const uint64_t length = last.offset + last.stored - first.offset;
  auto stored = Fetch(*batch.front()->file, first.key, first.offset, length);
  for (FileRead* fr : batch) {
    SG_RETURN_IF_ERROR(Guard(*fr, [&]() -> Status {
      if (!stored.ok()) {
        return FileError(*fr->file, stored.status().code(), stored.status().message());
      }
      const sg::ReadRange& range = fr->ranges.front();
      return ReadInOrder(*fr, std::string_view(*stored).substr(range.offset - first.offset,
                                                               range.stored));
    }));
  }
  if (stored.ok()) RecycleResponseBody(std::move(*stored));
  return Status::Ok();
}

Status ReadRun::Written(FileRead& fr, size_t r) {
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

Status ReadRun::ReadInOrder(FileRead& fr, std::optional<std::string_view> fetched) {
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

void ReadRun::Plan(FileRead& fr) {
  const ManifestFile& f = *fr.file;
  const uint64_t bytes = ReadRangeBytes(f);
  fr.ranges = PlanReadRanges(f, bytes, bytes * kRawPerStored);
  fr.frame_digests = HasFrameDigests(f);
  fr.unwritten = fr.ranges.size();
  fr.written.assign(fr.ranges.size(), 0);
  fr.sha = std::make_unique<Sha256Stream>();
}

Status ReadRun::Open(FileRead& fr) {
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

StatusOr<std::string> ReadRun::Fetch(const ManifestFile& file, const std::string& key,
                                     uint64_t offset, uint64_t length) {
  auto stored = store_.Get(JobPrefix(job_) + key, ByteRange{offset, length});
  if (!stored.ok()) {
    return NoteDamage(key, FileError(file, stored.status().code(), stored.status().message()));
  }
  if (stored->size() != length) {
    return NoteDamage(key, FileError(file, StatusCode::kCorruption,
                                     "object " + key + " is shorter than the manifest says"));
  }
  return stored;
}

Status ReadRun::WriteFrames(FileRead& fr, size_t r, std::string_view stored,
                            Sha256Stream* inline_sha) {
  RangeDecoder decoder(Target(fr, r, inline_sha));
  SG_RETURN_IF_ERROR(NoteDamage(fr.ranges[r].key, decoder.Feed(0, stored)));
  return NoteDamage(fr.ranges[r].key, decoder.Finish());
}

RangeDecoder::Target ReadRun::Target(FileRead& fr, size_t r, Sha256Stream* inline_sha) {
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

Status ReadRun::HashBack(FileRead& fr, const sg::ReadRange& range) {
  std::string& back = ReadBackBuffer();
  const uint64_t begin = range.first_frame * fr.file->frame_size;
  for (uint64_t at = begin; at < begin + range.raw; at += kReadBack) {
    const uint64_t n = std::min(kReadBack, begin + range.raw - at);
    SG_RETURN_IF_ERROR(fr.sink->ReadAt(at, n, &back));
    fr.sha->Update(back);
  }
  return Status::Ok();
}

Status ReadRun::Complete(FileRead& fr, Sha256Stream* sha) {
  const ManifestFile& file = *fr.file;
  // A file of one frame has the frame's digest as its own: the whole-file
  // SHA-256 (formats 1 and 2) is checked too, for free. (Longer files with
  // frame digests are covered frame by frame; their whole-file SHA-256 is
  // not recomputed, and format 3 has none.)
  const bool one_frame_differs = fr.frame_digests && file.frames.size() == 1 &&
                                 !file.sha256.empty() && file.frames[0].sha256 != file.sha256;
  if (one_frame_differs) {
    // The manifest contradicts itself; the object may be good.
    return FileError(file, StatusCode::kCorruption,
                     "SHA-256 does not match (object " + file.key + " is damaged)");
  }
  if (sha && !file.sha256.empty() && sha->FinishHex() != file.sha256) {
    // Format 1: every frame is in the file's own object. (An empty file of
    // format 3 has no frame and no digest: nothing to check.)
    return NoteDamage(file.key, FileError(file, StatusCode::kCorruption,
                                          "SHA-256 does not match (object " + file.key +
                                              " is damaged)"));
  }
  std::unique_ptr<FileSink> sink;
  {
    std::lock_guard<std::mutex> lock(fr.mu);
    sink = std::move(fr.sink);
  }
  if (!sink) return Status::Ok();
  return sink->Finish();  // closed here: only the files being read are open
}

Status ReadRun::NoteDamage(const std::string& key, Status st) {
  // A missing object (NotFound) counts too: see agent/repo/quarantine.h.
  if (!st.ok() && IsDamage(st)) {
    std::lock_guard<std::mutex> lock(damaged_mu_);
    damaged_objects_.insert(key);
  }
  return st;
}

std::vector<std::string> ReadRun::DamagedObjects() const {
  std::lock_guard<std::mutex> lock(damaged_mu_);
  return {damaged_objects_.begin(), damaged_objects_.end()};
}

void ReadRun::Report(uint64_t n) {
  const uint64_t total = done_ += n;
  if (progress_) {
    std::lock_guard<std::mutex> lock(progress_mu_);
    progress_(total);
  }
}

}  // namespace sg::snapshot_read_detail
