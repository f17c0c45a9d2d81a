#include "agent/repo/snapshot_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <thread>

#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/store_layout.h"
#include "common/bounded_executor.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/log.h"
#include "common/ordered_pipeline.h"
#include "common/spare_buffer.h"
#include "common/strings.h"
#include "common/xxh3.h"

namespace sg {
namespace {

constexpr uint64_t kSampleSize = 1 << 20;
constexpr int kClaimAttempts = 100;

// The identity of the open file `fd`, which must still be the captured one.
Status CheckUnchanged(int fd, const CapturedFile& source, std::string_view when) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno(errno, "stat " + source.staged_path);
  const FileIdentity now = IdentityOf(st);
  if (now == source.identity) return Status::Ok();
  return FileChanged(source.relpath, std::string(when) + " (" +
                                         DescribeChange(source.identity, now) +
                                         "); this capture is not committed");
}

// Opens the staged copy of `source`, which must still be the captured file.
StatusOr<UniqueFd> OpenCapturedSource(const CapturedFile& source) {
  auto fd = OpenFile(source.staged_path, O_RDONLY);
  if (!fd.ok()) {
    if (fd.status().Is(StatusCode::kNotFound)) return FileChanged(source.relpath, "vanished");
    return fd.status();
  }
  SG_RETURN_IF_ERROR(CheckUnchanged(fd->get(), source, "changed since it was captured"));
  return fd;
}

// The codec of a file of `size` bytes (> 0), open as `fd`: chosen from
// samples of its start, middle and end.
StatusOr<Codec> ChooseSnapshotFileCodec(int fd, uint64_t size, const std::string& read_from,
                                        const SnapshotOptions& options) {
  std::vector<std::string> samples;
  for (uint64_t at : {uint64_t{0}, size / 2, size > kSampleSize ? size - kSampleSize : 0}) {
    // No more than the file holds: the buffer is zeroed before it is read into.
    SG_ASSIGN_OR_RETURN(std::string s,
                        PreadUpTo(fd, at, std::min(kSampleSize, size - at), read_from));
    samples.push_back(std::move(s));
    if (size <= kSampleSize) break;
  }
  std::vector<std::string_view> views(samples.begin(), samples.end());
  return ChooseCodec(views, options.shuffle, options.level);
}

// One frame as a compressor task leaves it. A frame's digest is taken by the
// compressor task, off the serial path; a frame already stored (same codec,
// same digest) is referenced instead of encoded and uploaded (docs/design.md
// §4, "Frame reuse").
struct SnapshotEncodedFrame {
  std::string bytes;
  std::string sha256;              // hex, of the raw bytes
  std::string xxh3;                // hex, of the raw bytes
  std::optional<FrameRef> stored;  // set: reuse this frame
};

// The compressor task of one frame's `raw` bytes.
StatusOr<SnapshotEncodedFrame> EncodeSnapshotFrame(Codec codec, int level, FrameIndex* index,
                                                   const std::string& raw) {
  SnapshotEncodedFrame e;
  e.sha256 = Sha256Hex(raw);
  e.xxh3 = Xxh3Hex(raw);
  // While the history is still being read, the frame is compressed
  // first and looked up after, so that the first frames do not wait
  // for the index; a frame found then drops its bytes.
  const bool early = index && !index->ready();
  if (index && !early) e.stored = index->Find(codec, e.sha256);
  if (!e.stored) {
    SG_ASSIGN_OR_RETURN(e.bytes, EncodeFrame(codec, raw, level));
  }
  if (early) {
    e.stored = index->Find(codec, e.sha256);
    if (e.stored) {
      GiveSharedBuffer(std::move(e.bytes));
      e.bytes.clear();
    }
  }
  return e;
}

// Adds the next frame, in order, to `file`: a reference to a stored copy, or
// a frame of the file's own object at `own_offset`, appended to `writer`.
Status AddSnapshotFrame(SnapshotEncodedFrame encoded, ManifestFile& file, uint64_t& own_offset,
                        FrameIndex* index, ObjectWriter& writer) {
  if (encoded.stored) {
    // A frame of a manifest older than "xxh3" gains it here: the
    // SHA-256 matched, so the bytes are these.
    if (encoded.stored->xxh3.empty()) encoded.stored->xxh3 = std::move(encoded.xxh3);
    file.stored_size += encoded.stored->stored;
    file.frames.push_back(std::move(*encoded.stored));
    return Status::Ok();
  }
  FrameRef ref{file.key, own_offset, encoded.bytes.size(), std::move(encoded.sha256),
               std::move(encoded.xxh3)};
  own_offset += ref.stored;
  file.stored_size += ref.stored;
  if (index) index->Add(file.codec, ref);
  file.frames.push_back(std::move(ref));
  return writer.Append(std::move(encoded.bytes));
}

// The seqs of the manifests in `listed` (a listing of the job's snapshots),
// newest first, as the catalog lists them.
std::vector<uint64_t> ManifestSeqsIn(const std::string& job, const std::vector<ObjectInfo>& listed) {
  std::vector<uint64_t> seqs;
  for (const ObjectInfo& o : listed) {
    auto s = SnapshotSeqOfKey(job, o.key);
    if (s && o.key == ManifestKey(job, *s)) seqs.push_back(*s);
  }
  std::sort(seqs.rbegin(), seqs.rend());
  return seqs;
}

// Takes back what a failed attempt uploaded under `seq` (best effort; what
// a crash leaves behind, gc removes). The manifest was never written, so
// nothing here was ever visible as a snapshot. The claim goes last: while it
// stands no other writer can take this seq and write objects of the same
// names that this cleanup would delete.
void TakeBackUnfinished(ObjectStore& store, const std::string& job, uint64_t seq) {
  auto leftovers = ListAll(store, SnapshotPrefix(job, seq));
  if (!leftovers.ok()) return;
  const std::string claim = ClaimKey(job, seq);
  for (const ObjectInfo& o : *leftovers) {
    if (o.key != claim) (void)store.Delete(o.key);
  }
  (void)store.Delete(claim);
}

}  // namespace

SnapshotWriter::SnapshotWriter(ObjectStore& store, Clock& clock, SnapshotOptions options)
    : store_(store),
      clock_(clock),
      options_(options),
      threads_(options.threads > 0 ? options.threads
                                   : std::max(1u, std::thread::hardware_concurrency())) {}

StatusOr<ClaimedSeq> SnapshotWriter::ClaimSeq(const std::string& job,
                                              const std::string& claim_body,
                                              const std::vector<ObjectInfo>& objects) {
  uint64_t highest = 0;
  for (const ObjectInfo& o : objects) {
    if (auto seq = SnapshotSeqOfKey(job, o.key)) highest = std::max(highest, *seq);
  }
  for (uint64_t seq = highest + 1; seq <= highest + kClaimAttempts; ++seq) {
    const Clock::MonoTime sent = clock_.Monotonic();
    auto claimed = store_.Put(ClaimKey(job, seq), claim_body, PutCondition::CreateOnly());
    if (claimed.ok()) return ClaimedSeq{seq, *claimed, sent};
    if (!claimed.status().Is(StatusCode::kPreconditionFailed)) return claimed.status();
  }
  return Status::Unavailable("could not claim a snapshot seq after " +
                             std::to_string(kClaimAttempts) + " tries");
}

StatusOr<ManifestFile> SnapshotWriter::UploadFile(const std::string& job, uint64_t seq,
                                                  const CapturedFile& source,
                                                  const ProgressFn& progress) {
  SG_ASSIGN_OR_RETURN(UniqueFd fd, OpenCapturedSource(source));
  const uint64_t size = source.size;
  const std::string& read_from = source.staged_path;

  ManifestFile file;
  file.path = source.relpath;
  file.size = size;
  file.mode = source.mode;
  file.frame_size = kFrameSize;
  file.codec = Codec::kNone;
  if (size > 0) {
    SG_ASSIGN_OR_RETURN(file.codec, ChooseSnapshotFileCodec(fd.get(), size, read_from, options_));
  }
  file.key = FileObjectKey(seq, file.path, file.codec);
  SG_ASSIGN_OR_RETURN(std::unique_ptr<ObjectWriter> writer,
                      store_.NewWriter(JobPrefix(job) + file.key, size));

  // A file of one frame needs no compression pool of its own.
  const int threads = size > kFrameSize ? threads_ : 1;
  BoundedExecutor compressors(threads, 2 * threads);
  FrameIndex* const index = index_;
  uint64_t own_offset = 0;
  OrderedPipeline<SnapshotEncodedFrame> pipeline(
      compressors, static_cast<size_t>(2 * threads), [&](SnapshotEncodedFrame encoded) -> Status {
        return AddSnapshotFrame(std::move(encoded), file, own_offset, index, *writer);
      });
  const Codec codec = file.codec;
  const int level = options_.level;
  for (uint64_t offset = 0; offset < size; offset += kFrameSize) {
    const uint64_t want = std::min(kFrameSize, size - offset);
    // Read into a reused buffer, given back once compressed and hashed
    // (common/spare_buffer.h): a fresh one per frame costs a page fault per 4 KiB.
    std::string raw = TakeSharedBuffer(want);
    SG_RETURN_IF_ERROR(PreadInto(fd.get(), offset, want, &raw, read_from));
    if (raw.size() != want) {  // it shrank under us
      return FileChanged(source.relpath, "shrank while it was read; this capture is not committed");
    }
    if (cancel_ && cancel_->load()) return Status::Cancelled("snapshot cancelled");
    if (progress) progress(raw.size());
    SG_RETURN_IF_ERROR(pipeline.Submit(
        [codec, level, index, raw = std::move(raw)]() mutable -> StatusOr<SnapshotEncodedFrame> {
          auto encoded = EncodeSnapshotFrame(codec, level, index, raw);
          GiveSharedBuffer(std::move(raw));
          return encoded;
        }));
  }
  SG_RETURN_IF_ERROR(pipeline.Finish());
  SG_RETURN_IF_ERROR(CheckUnchanged(fd.get(), source, "changed while it was read"));
  // No whole-file digest (format 3): the frames' digests, taken on the
  // compressor tasks, cover every byte (docs/design.md §4, "What an upload
  // hashes").
  if (size > 0 && own_offset == 0) {
    writer->Abort();  // every frame is a reference: the file has no object of its own
  } else {
    SG_RETURN_IF_ERROR(writer->Commit().status());
  }
  return file;
}

Status SnapshotWriter::BuildIndex(const std::string& job, const std::vector<uint64_t>& before,
                                  std::shared_future<uint64_t> claimed, FrameIndex& index) {
  // The manifests of the listing the claim was chosen from are read while
  // the seq is claimed, in parallel (Prefetch): this is on the way to the
  // commit. A seq's manifest never changes, so reading it early is safe;
  // which ones the index may use is decided by the listing after the claim
  // (docs/design.md §4).
  SnapshotCatalog catalog(store_, job);
  catalog.Prefetch(before);
  const uint64_t own = claimed.get();
  if (own == 0) return Status::Ok();  // no snapshot to index for
  // The quarantine list is listed beside the history, once per snapshot: no
  // frame of a damaged object is offered (docs/design.md §4, "Quarantine").
  std::set<std::string> quarantined;
  SG_ASSIGN_OR_RETURN(std::vector<uint64_t> committed,
                      catalog.CommittedAndQuarantined(quarantined));
  // Only older snapshots: a manifest may reference frames of lower seqs
  // alone (readers refuse any other: docs/format.md, "References"),
  // and a seq above this one can be committed while this one is written.
  std::erase_if(committed, [own](uint64_t seq) { return seq >= own; });
  catalog.Prefetch(committed);
  for (uint64_t seq : committed) {
    // One that cannot be read or parsed offers nothing to reuse.
    auto m = catalog.ReadManifest(seq);
    if (m.ok()) index.AddManifest(*m, quarantined);  // newest first: the first copy stays
  }
  return Status::Ok();
}

Status SnapshotWriter::UploadPack(const std::string& job, uint64_t seq, int number,
                                  const std::vector<const CapturedFile*>& sources,
                                  std::vector<ManifestFile*> out, const ProgressFn& progress) {
  const std::string key = PackObjectKey(seq, number);
  std::string object;
  for (size_t i = 0; i < sources.size(); ++i) {
    const CapturedFile& source = *sources[i];
    SG_ASSIGN_OR_RETURN(UniqueFd fd, OpenCapturedSource(source));
    SG_ASSIGN_OR_RETURN(std::string raw, PreadUpTo(fd.get(), 0, source.size, source.staged_path));
    if (raw.size() != source.size) {
      return FileChanged(source.relpath, "shrank while it was read; this capture is not committed");
    }
    SG_RETURN_IF_ERROR(CheckUnchanged(fd.get(), source, "changed while it was read"));
    if (cancel_ && cancel_->load()) return Status::Cancelled("snapshot cancelled");
    ManifestFile& file = *out[i];
    file.path = source.relpath;
    file.size = source.size;
    file.mode = source.mode;
    file.frame_size = kFrameSize;
    // Always plain zstd: a file of a pack is one frame that `zstd -d`
    // decodes by itself (docs/format.md, "Packs").
    file.codec = Codec::kZstd;
    // The file's own key names no object: its frame lives in the pack, or
    // in the object of an earlier copy of the same bytes (frame reuse: a
    // tokenizer or config file unchanged since the last snapshot is
    // referenced, not packed again; docs/design.md §4).
    file.key = FileObjectKey(seq, file.path, file.codec);
    std::string sha256 = Sha256Hex(raw);
    std::string xxh3 = Xxh3Hex(raw);
    if (auto stored = index_ ? index_->Find(file.codec, sha256) : std::nullopt) {
      if (stored->xxh3.empty()) stored->xxh3 = std::move(xxh3);
      file.stored_size = stored->stored;
      file.frames.push_back(std::move(*stored));
    } else {
      SG_ASSIGN_OR_RETURN(std::string encoded, EncodeFrame(file.codec, raw, options_.level));
      FrameRef ref{key, object.size(), encoded.size(), std::move(sha256), std::move(xxh3)};
      file.stored_size = ref.stored;
      if (index_) index_->Add(file.codec, ref);
      file.frames.push_back(std::move(ref));
      object += encoded;
    }
    if (progress) progress(raw.size());
  }
  if (object.empty()) return Status::Ok();  // every file is a reference: no pack object
  return store_.Put(JobPrefix(job) + key, object, PutCondition::None()).status();
}

StatusOr<SnapshotResult> SnapshotWriter::Write(const CapturedCheckpoint& capture,
                                               const SnapshotRequest& request,
                                               const ProgressFn& progress) {
  if (capture.files().empty()) return Status::InvalidArgument("a snapshot needs at least one file");
  for (const CapturedFile& f : capture.files()) SG_RETURN_IF_ERROR(CheckRelativePath(f.relpath));
  const std::string& resume = capture.checkpoint().resume;
  if (resume != "." && !resume.empty()) SG_RETURN_IF_ERROR(CheckRelativePath(resume));

  Manifest manifest;
  manifest.job = request.job;
  manifest.generation = request.generation;
  manifest.created = FormatUtc(clock_.Now(), /*millis=*/true);
  manifest.instance = request.instance;
  manifest.index = request.index;
  manifest.attempt = request.attempt;
  manifest.preset = request.preset;
  manifest.step = capture.checkpoint().step;
  manifest.resume = resume == "." ? "" : resume;

  const nlohmann::ordered_json claim = {{"instance", request.instance},
                                        {"generation", request.generation},
                                        {"created", manifest.created},
                                        {"writer", RandomHex(8)}};
  // The history is read on a thread of its own, from before the claim;
  // the index takes only the manifests of a listing made after the claim
  // (the order gc's rule relies on: docs/design.md §4, "Retention with
  // shared objects"). The first frames are read, hashed and compressed
  // meanwhile; their lookups wait for it (FrameIndex's `pending`).
  // One listing of the history before the claim: the next free seq, and
  // the manifests to read ahead.
  SG_ASSIGN_OR_RETURN(const std::vector<ObjectInfo> listed,
                      ListAll(store_, SnapshotsPrefix(request.job)));
  const std::vector<uint64_t> before = ManifestSeqsIn(request.job, listed);
  FrameIndex index(/*pending=*/true);
  std::promise<uint64_t> claimed;  // the claimed seq; 0: none
  std::thread reader;
  if (options_.reuse) {
    reader = std::thread([this, &index, &before, job = request.job,
                          future = claimed.get_future().share()] {
      Status st = BuildIndex(job, before, future, index);
      if (!st.ok()) {
        LogWarn("not reusing stored frames, reading the history failed: {}", st.message());
      }
      index.MarkReady(st.ok());
    });
  }
  auto claim_seq = ClaimSeq(request.job, claim.dump(), listed);
  claimed.set_value(claim_seq.ok() ? claim_seq->seq : 0);
  if (!claim_seq.ok()) {
    if (reader.joinable()) reader.join();
    return claim_seq.status();
  }
  manifest.seq = claim_seq->seq;
  const uint64_t seq = manifest.seq;
  // Renewed while the files upload, so that gc knows this writer is live
  // however long one upload takes; checked before the commit.
  ClaimKeeper keeper(store_, clock_, ClaimKey(request.job, seq), claim, claim_seq->etag,
                     claim_seq->sent, options_.claim);
  keeper.Start();
  claim_ = &keeper;
  if (options_.reuse) index_ = &index;
  cancel_ = request.cancel;
  auto result = UploadAndCommit(capture, request, std::move(manifest), progress);
  ReleaseSharedBuffers();  // an idle agent holds no upload buffers
  keeper.Stop();
  if (reader.joinable()) reader.join();
  cancel_ = nullptr;
  index_ = nullptr;
  claim_ = nullptr;
  if (!result.ok()) TakeBackUnfinished(store_, request.job, seq);
  return result;
}

}  // namespace sg
