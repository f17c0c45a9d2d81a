#include "agent/snapshot_file_reader.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "agent/store_layout.h"
#include "common/bounded_executor.h"
#include "common/crypto.h"
#include "common/ordered_pipeline.h"
#include "common/strings.h"

namespace sg {
namespace {

// Consecutive frames are fetched together up to this many stored, and raw,
// bytes.
constexpr uint64_t kReadRange = 8ull << 20;

}  // namespace

std::vector<ReadRange> PlanReadRanges(const ManifestFile& file, uint64_t max_bytes) {
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
          (ref.key != r.key || ref.offset != r.offset + r.stored || r.stored >= max_bytes ||
           r.raw + raw > max_bytes)) {
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

bool IsDamage(const Status& st) {
  return st.Is(StatusCode::kCorruption) || st.Is(StatusCode::kNotFound) ||
         st.Is(StatusCode::kOutOfRange);
}

SnapshotFileReader::SnapshotFileReader(ObjectStore& store, std::string job, int parallel_reads)
    : store_(store), job_(std::move(job)), parallel_reads_(std::max(1, parallel_reads)) {}

Status SnapshotFileReader::Read(const Manifest& manifest, const OpenFileSink& open,
                                const ProgressFn& progress) {
  return ReadAll(manifest, open, /*name_every_damaged_file=*/false, progress);
}

Status SnapshotFileReader::Verify(const Manifest& manifest, const ProgressFn& progress) {
  return ReadAll(manifest, nullptr, /*name_every_damaged_file=*/true, progress);
}

Status SnapshotFileReader::ReadAll(const Manifest& manifest, const OpenFileSink& open,
                                   bool name_every_damaged_file, const ProgressFn& progress) {
  std::atomic<uint64_t> done{0};
  std::mutex progress_mu;
  auto report = [&](uint64_t n) {
    const uint64_t total = done += n;
    if (progress) {
      std::lock_guard<std::mutex> lock(progress_mu);
      progress(total);
    }
  };
  std::vector<std::string> damaged(manifest.files.size());
  auto read_file = [&](size_t i) -> Status {
    const ManifestFile& f = manifest.files[i];
    std::unique_ptr<FileSink> sink;
    if (open) {
      SG_ASSIGN_OR_RETURN(sink, open(f));
    }
    Status st = ReadFile(f, sink.get(), report);
    if (st.ok() && sink) st = sink->Finish();
    if (!st.ok() && name_every_damaged_file && IsDamage(st)) {
      damaged[i] = st.message();
      return Status::Ok();
    }
    return st;
  };
  // Files of one range several at a time (each costs a round trip); bigger
  // ones one at a time, their ranges fetched and decoded in parallel.
  BoundedExecutor small_files(parallel_reads_, parallel_reads_);
  for (size_t i = 0; i < manifest.files.size(); ++i) {
    Status st = manifest.files[i].stored_size <= kReadRange
                    ? small_files.Submit([&read_file, i] { return read_file(i); })
                    : read_file(i);
    if (!st.ok()) {
      (void)small_files.Wait();
      return st;
    }
  }
  SG_RETURN_IF_ERROR(small_files.Wait());
  std::vector<std::string> bad;
  for (std::string& why : damaged) {
    if (!why.empty()) bad.push_back(std::move(why));
  }
  if (bad.empty()) return Status::Ok();
  return Status::Corruption("snapshot " + SeqName(manifest.seq) +
                            " is damaged: " + Join(bad, "; "));
}

Status SnapshotFileReader::ReadFile(const ManifestFile& file, FileSink* sink,
                                    const std::function<void(uint64_t)>& progress) {
  // Small files are one range: no pool of readers for them.
  const int parallel = file.stored_size > kReadRange ? parallel_reads_ : 1;
  BoundedExecutor readers(parallel, parallel);
  Sha256Stream sha;
  uint64_t seen = 0;
  OrderedPipeline<std::string> pipeline(readers, static_cast<size_t>(parallel),
                                        [&](std::string raw) -> Status {
                                          sha.Update(raw);
                                          seen += raw.size();
                                          if (progress) progress(raw.size());
                                          return sink ? sink->Append(raw) : Status::Ok();
                                        });
  for (const ReadRange& range : PlanReadRanges(file, kReadRange)) {
    const size_t first = range.first_frame;
    const size_t last = range.end_frame;
    const std::string object = range.key;
    const uint64_t range_offset = range.offset;
    const uint64_t range_length = range.stored;
    const uint64_t range_raw = range.raw;
    SG_RETURN_IF_ERROR(pipeline.Submit([&, first, last, object, range_offset, range_length,
                                        range_raw]() -> StatusOr<std::string> {
      auto stored = store_.Get(JobPrefix(job_) + object, ByteRange{range_offset, range_length});
      if (!stored.ok()) {
        return Status(stored.status().code(),
                      "file \"" + file.path + "\": " + stored.status().message());
      }
      if (stored->size() != range_length) {
        return Status::Corruption("file \"" + file.path + "\": object " + object +
                                  " is shorter than the manifest says");
      }
      std::string raw;
      raw.reserve(range_raw);  // no growth by doubling
      uint64_t at = 0;
      for (size_t i = first; i < last; ++i) {
        const uint64_t frame_stored = file.frames[i].stored;
        auto decoded = DecodeFrame(file.codec, std::string_view(*stored).substr(at, frame_stored),
                                   file.FrameRawSize(i));
        if (!decoded.ok()) {
          return Status::Corruption("file \"" + file.path + "\": frame " + std::to_string(i) +
                                    " of " + object + ": " + decoded.status().message());
        }
        raw += *decoded;
        at += frame_stored;
      }
      return raw;
    }));
  }
  SG_RETURN_IF_ERROR(pipeline.Finish());
  if (seen != file.size) {
    return Status::Corruption("file \"" + file.path + "\": decoded " + std::to_string(seen) +
                              " bytes, the manifest says " + std::to_string(file.size));
  }
  if (sha.FinishHex() != file.sha256) {
    return Status::Corruption("file \"" + file.path + "\": SHA-256 does not match (object " +
                              file.key + " is damaged)");
  }
  return Status::Ok();
}

}  // namespace sg
