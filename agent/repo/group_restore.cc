// RestoreGroupPart: a node's part of a group snapshot, and DCP's `.metadata`
// from rank 0's part (docs/multi-node.md, "Which preset").
#include "agent/repo/group_restore.h"

#include <filesystem>
#include <mutex>

#include "agent/detect/preset_rules.h"
#include "agent/repo/quarantine.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/snapshot_file_reader.h"
#include "agent/repo/store_layout.h"
#include "common/files.h"
#include "common/log.h"

namespace sg {
namespace {

// One small file's bytes, in memory.
class MemorySink final : public FileSink {
 public:
  MemorySink(std::string* bytes, uint64_t size) : bytes_(bytes) { bytes_->assign(size, '\0'); }
  Status WriteAt(uint64_t offset, std::string_view raw) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (offset > bytes_->size() || raw.size() > bytes_->size() - offset) {
      return Status::Corruption("a frame lies beyond the file's size");
    }
    bytes_->replace(offset, raw.size(), raw);
    return Status::Ok();
  }
  Status ReadAt(uint64_t offset, uint64_t length, std::string* out) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (offset > bytes_->size() || length > bytes_->size() - offset) {
      return Status::Corruption("read back beyond the file's size");
    }
    *out = bytes_->substr(offset, length);
    return Status::Ok();
  }
  Status Finish() override { return Status::Ok(); }

 private:
  std::mutex mu_;
  std::string* bytes_;
};

// Rank 0's `.metadata` of its checkpoint directory: its bytes and mode, or
// nothing when rank 0's part has none.
struct SharedFile {
  std::string bytes;
  uint32_t mode = 0644;
};
StatusOr<std::optional<SharedFile>> RankZeroMetadata(ObjectStore& store, const std::string& job,
                                                     const GroupCommit& group) {
  const std::string zero_job = PartJob(job, 0);
  SnapshotCatalog catalog(store, zero_job);
  SG_ASSIGN_OR_RETURN(Manifest manifest, catalog.ReadManifest(group.parts.at(0).seq));
  const std::string name(preset_detail::kDcpMetadata);
  const std::string wanted =
      manifest.resume.empty() || manifest.resume == "." ? name : manifest.resume + "/" + name;
  std::erase_if(manifest.files, [&](const ManifestFile& f) { return f.path != wanted; });
  if (manifest.files.empty()) return std::optional<SharedFile>();
  SharedFile file;
  file.mode = manifest.files.front().mode & 0777;
  SnapshotFileReader reader(store, zero_job, /*parallel_reads=*/2);
  const Status st = reader.Read(manifest, [&](const ManifestFile& f) {
    return StatusOr<std::unique_ptr<FileSink>>(std::make_unique<MemorySink>(&file.bytes, f.size));
  });
  // Damage found here is rank 0's part's (docs/design.md §4, "Quarantine").
  QuarantineDamaged(store, zero_job, reader, st, "restore", manifest.seq);
  SG_RETURN_IF_ERROR(st);
  return std::optional<SharedFile>(std::move(file));
}

}  // namespace

StatusOr<RestoreResult> RestoreGroupPart(ObjectStore& store, const std::string& job, Preset preset,
                                         const GroupCommit& group, int rank,
                                         const std::string& target, const RestoreOptions& options) {
  // Fetched first: a failure leaves the target as it was.
  std::optional<SharedFile> metadata;
  if (preset == Preset::kDcp && rank != 0) {
    auto fetched = RankZeroMetadata(store, job, group);
    if (!fetched.ok()) {
      return fetched.status().WithContext("reading rank 0's .metadata of group snapshot " +
                                          SeqName(group.seq));
    }
    metadata = std::move(*fetched);
  }
  const PartRecord& part = group.parts.at(rank);
  // Exactly that part: a damaged object it finds is quarantined in the
  // part job's list (Restorer::RestoreOne; docs/design.md §14).
  SG_ASSIGN_OR_RETURN(RestoreResult result,
                      Restorer(store, options).Restore(PartJob(job, rank), target, part.seq));
  if (!metadata) return result;
  // Written unless the part has its own (a shared filesystem).
  const std::string path = result.resume_path + "/" + std::string(preset_detail::kDcpMetadata);
  std::error_code ec;
  const auto type = std::filesystem::symlink_status(path, ec).type();
  if (type == std::filesystem::file_type::not_found) {
    SG_RETURN_IF_ERROR(WriteFileAtomic(path, metadata->bytes, metadata->mode)
                           .WithContext("adding rank 0's .metadata as " + path));
    LogInfo("added rank 0's .metadata of group snapshot {} as {}", SeqName(group.seq), path);
  } else if (ec) {
    return Status::FromErrno(ec.value(), "look at " + path);
  }
  return result;
}

}  // namespace sg
