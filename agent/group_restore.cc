// RestoreGroupPart: a node's part of a group snapshot, and DCP's `.metadata`
// from rank 0's part (docs/multi-node.md, "Which preset").
#include "agent/group_restore.h"

#include <filesystem>
#include <mutex>

#include "agent/checkpoint_relpath.h"
#include "agent/preset_rules.h"
#include "agent/snapshot_catalog.h"
#include "agent/snapshot_file_reader.h"
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

// Rank 0's `.metadata` of its checkpoint directory, written as `path` unless
// a file is there already. Nothing when rank 0's part has none.
Status AddRankZeroMetadata(ObjectStore& store, const std::string& job, const GroupCommit& group,
                           const std::string& path) {
  std::error_code ec;
  if (std::filesystem::symlink_status(path, ec).type() != std::filesystem::file_type::not_found) {
    return Status::Ok();  // the node's own (a shared filesystem), or restored with the part
  }
  const PartRecord& zero = group.parts.at(0);
  const std::string zero_job = PartJob(job, 0);
  SnapshotCatalog catalog(store, zero_job);
  SG_ASSIGN_OR_RETURN(Manifest manifest, catalog.ReadManifest(zero.seq));
  const std::string wanted = manifest.resume.empty() || manifest.resume == "."
                                 ? std::string(preset_detail::kDcpMetadata)
                                 : manifest.resume + "/" + std::string(preset_detail::kDcpMetadata);
  std::erase_if(manifest.files, [&](const ManifestFile& f) { return f.path != wanted; });
  if (manifest.files.empty()) return Status::Ok();
  std::string bytes;
  SnapshotFileReader reader(store, zero_job, /*parallel_reads=*/2);
  SG_RETURN_IF_ERROR(reader.Read(manifest, [&](const ManifestFile& f) {
    return StatusOr<std::unique_ptr<FileSink>>(std::make_unique<MemorySink>(&bytes, f.size));
  }));
  SG_RETURN_IF_ERROR(WriteFileAtomic(path, bytes, manifest.files.front().mode & 0777));
  LogInfo("added rank 0's {} of group snapshot {} as {}", wanted, SeqName(group.seq), path);
  return Status::Ok();
}

}  // namespace

StatusOr<RestoreResult> RestoreGroupPart(ObjectStore& store, const std::string& job, Preset preset,
                                         const GroupCommit& group, int rank,
                                         const std::string& target, const RestoreOptions& options) {
  const PartRecord& part = group.parts.at(rank);
  SG_ASSIGN_OR_RETURN(RestoreResult result,
                      Restorer(store, options).Restore(PartJob(job, rank), target, part.seq));
  if (preset == Preset::kDcp && rank != 0) {
    const std::string path = result.resume_path + "/" + std::string(preset_detail::kDcpMetadata);
    SG_RETURN_IF_ERROR(AddRankZeroMetadata(store, job, group, path)
                           .WithContext("adding rank 0's .metadata as " + path));
  }
  return result;
}

}  // namespace sg
