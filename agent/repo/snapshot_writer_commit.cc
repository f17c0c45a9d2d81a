// The second half of SnapshotWriter::Write, once a seq is claimed: uploads
// every file of the capture (small ones in packs or several at once, big
// ones one at a time), then commits the manifest with a create-only write
// and moves `latest` (docs/design.md §5, "Commit protocol").
#include <algorithm>
#include <atomic>
#include <mutex>

#include "agent/repo/snapshot_writer.h"
#include "agent/repo/store_layout.h"
#include "common/bounded_executor.h"
#include "common/log.h"
#include "common/strings.h"

namespace sg {
namespace {

// One pack object: its files, and where their manifest entries go.
struct SnapshotPack {
  std::vector<const CapturedFile*> group;
  std::vector<ManifestFile*> out;
};

// Small files in packs of up to pack_bytes, in path order (files of one
// directory end up side by side); none when there are fewer than
// pack_min_files of them. Marks the packed files in `in_pack`.
std::vector<SnapshotPack> PlanSnapshotPacks(const std::vector<CapturedFile>& sources,
                                            std::vector<ManifestFile>& files,
                                            const SnapshotOptions& options,
                                            std::vector<char>& in_pack) {
  std::vector<size_t> packed;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].size > 0 && sources[i].size <= options.pack_file_max) packed.push_back(i);
  }
  if (packed.size() < options.pack_min_files) packed.clear();
  for (size_t i : packed) in_pack[i] = 1;
  std::sort(packed.begin(), packed.end(),
            [&](size_t a, size_t b) { return sources[a].relpath < sources[b].relpath; });
  std::vector<SnapshotPack> packs;
  for (size_t at = 0; at < packed.size();) {
    SnapshotPack pack;
    uint64_t bytes = 0;
    while (at < packed.size() &&
           (pack.group.empty() || bytes + sources[packed[at]].size <= options.pack_bytes)) {
      bytes += sources[packed[at]].size;
      pack.group.push_back(&sources[packed[at]]);
      pack.out.push_back(&files[packed[at]]);
      ++at;
    }
    packs.push_back(std::move(pack));
  }
  return packs;
}

// `latest` is a hint: never moved backwards, and a failure to write it is
// not fatal (restore finds the snapshot by listing).
void UpdateSnapshotLatest(ObjectStore& store, const std::string& job, uint64_t seq) {
  auto current = store.Get(LatestKey(job));
  const auto current_seq = current.ok() ? ParseSeqName(Trim(*current)) : std::optional<uint64_t>();
  if (!current_seq || *current_seq < seq) {
    Status st = store.Put(LatestKey(job), SeqName(seq) + "\n", PutCondition::None()).status();
    if (!st.ok()) {
      LogWarn("snapshot {} is committed, but updating latest failed: {}", SeqName(seq),
              st.message());
    }
  }
}

SnapshotResult SnapshotResultOf(Manifest manifest) {
  SnapshotResult result;
  result.seq = manifest.seq;
  result.bytes = manifest.TotalSize();
  result.stored_bytes = manifest.TotalStored();
  result.new_bytes = manifest.NewStored();
  result.reused_bytes = manifest.ReusedStored();
  result.manifest = std::move(manifest);
  return result;
}

}  // namespace

Status SnapshotWriter::UploadFiles(const std::string& job, uint64_t seq,
                                   const std::vector<CapturedFile>& sources,
                                   std::vector<ManifestFile>& files, const ProgressFn& report) {
  std::vector<char> in_pack(sources.size(), 0);
  const std::vector<SnapshotPack> packs = PlanSnapshotPacks(sources, files, options_, in_pack);
  BoundedExecutor small_files(options_.files_in_flight, options_.files_in_flight);
  int number = 0;
  for (const SnapshotPack& pack : packs) {
    ++number;
    Status st_pack = small_files.Submit([&, number, group = pack.group, out = pack.out]() {
      return UploadPack(job, seq, number, group, out, report);
    });
    if (!st_pack.ok()) {
      (void)small_files.Wait();
      return st_pack;
    }
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    if (in_pack[i]) continue;
    const bool small = sources[i].size < kFrameSize;
    auto upload = [&, i]() -> Status {
      SG_ASSIGN_OR_RETURN(files[i], UploadFile(job, seq, sources[i], report));
      return Status::Ok();
    };
    Status st_upload = small ? small_files.Submit(upload) : upload();
    if (!st_upload.ok()) {
      (void)small_files.Wait();
      return st_upload;
    }
  }
  return small_files.Wait();
}

StatusOr<SnapshotResult> SnapshotWriter::UploadAndCommit(const CapturedCheckpoint& capture,
                                                         const SnapshotRequest& request,
                                                         Manifest manifest,
                                                         const ProgressFn& progress) {
  const std::vector<CapturedFile>& sources = capture.files();
  // Big files one at a time (their frames are compressed in parallel); small
  // ones several at once, since each costs a round trip more than CPU.
  std::vector<ManifestFile> files(sources.size());
  std::atomic<uint64_t> done_bytes{0};
  std::mutex progress_mu;
  const ProgressFn report = [&](uint64_t n) {
    const uint64_t total = done_bytes += n;
    if (progress) {
      std::lock_guard<std::mutex> lock(progress_mu);
      progress(total);
    }
  };
  SG_RETURN_IF_ERROR(UploadFiles(request.job, manifest.seq, sources, files, report));
  manifest.files = std::move(files);
  std::sort(manifest.files.begin(), manifest.files.end(),
            [](const ManifestFile& a, const ManifestFile& b) { return a.path < b.path; });

  if (request.cancel && request.cancel->load()) return Status::Cancelled("snapshot cancelled");
  SG_RETURN_IF_ERROR(capture.Verify());
  if (request.verify_before_commit) SG_RETURN_IF_ERROR(request.verify_before_commit());
  // Every object the manifest references is still there if the claim was
  // held throughout: gc deletes none while a live claim stands (docs/design.md
  // §4, "Live writers").
  if (claim_) SG_RETURN_IF_ERROR(claim_->CheckHeld());

  // The commit point.
  SG_RETURN_IF_ERROR(store_
                         .Put(ManifestKey(request.job, manifest.seq),
                              ManifestToJson(manifest).dump(1), PutCondition::CreateOnly())
                         .status()
                         .WithContext("commit snapshot " + SeqName(manifest.seq)));

  UpdateSnapshotLatest(store_, request.job, manifest.seq);
  return SnapshotResultOf(std::move(manifest));
}

}  // namespace sg
