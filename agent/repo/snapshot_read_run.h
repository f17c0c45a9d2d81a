// The workers' side of one SnapshotFileReader::Read or Verify
// (agent/repo/snapshot_file_reader.h; docs/design.md §7): a file's ranges are
// fetched, decoded, checked and written, format 1 files hashed back in
// order, and each file finished after its last range. Used by
// agent/repo/snapshot_file_reader.cc alone.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/repo/manifest.h"
#include "agent/repo/range_decoder.h"
#include "agent/repo/snapshot_file_reader.h"
#include "common/crypto.h"
#include "common/object_store.h"

namespace sg::snapshot_read_detail {

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
  // The objects (relative to "<job>/") that a read found damaged
  // (IsDamage: Corruption, OutOfRange, NotFound), sorted: what restore and
  // `verify` quarantine (agent/repo/quarantine.h).
  std::vector<std::string> DamagedObjects() const;

  // Runs a task for `fr`, naming a damaged file instead of failing in verify.
  Status Guard(FileRead& fr, const std::function<Status()>& task);

  // Reads range `r` and writes each frame at its place as soon as its bytes
  // are in (RangeDecoder), checking frame digests when there are;
  // `inline_sha` (verify of format 1, in order) hashes what is decoded.
  Status ReadRange(FileRead& fr, size_t r, Sha256Stream* inline_sha);

  // Files of one range each that lie back to back in one object (a pack):
  // one ranged read for all of them, then each file decoded, checked and
  // finished by itself, so a damaged one is named alone.
  Status ReadBatch(const std::vector<FileRead*>& batch);

  // After range `r` is written: counts it, hashes what is now in order
  // (format 1) and finishes the file after its last range.
  Status Written(FileRead& fr, size_t r);

  // A file read by one task, range after range: files of one range, verify
  // of a format 1 file (nothing written to hash back), files without frames.
  // `fetched`, when given, is the stored bytes of its only range.
  Status ReadInOrder(FileRead& fr, std::optional<std::string_view> fetched = std::nullopt);

  // Plans the ranges of `fr.file` and readies `fr` for them.
  static void Plan(FileRead& fr);

 private:
  Status Open(FileRead& fr);
  StatusOr<std::string> Fetch(const ManifestFile& file, const std::string& key, uint64_t offset,
                              uint64_t length);
  // Decodes the frames of range `r` from `stored`, all of it at hand.
  Status WriteFrames(FileRead& fr, size_t r, std::string_view stored, Sha256Stream* inline_sha);
  RangeDecoder::Target Target(FileRead& fr, size_t r, Sha256Stream* inline_sha);
  Status HashBack(FileRead& fr, const sg::ReadRange& range);
  // Checks the whole-file SHA-256 (`sha`, format 1) and finishes the sink.
  Status Complete(FileRead& fr, Sha256Stream* sha);
  void Report(uint64_t n);
  // Notes `key` as damaged when `st` says so; returns `st`.
  Status NoteDamage(const std::string& key, Status st);

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
  mutable std::mutex damaged_mu_;
  std::set<std::string> damaged_objects_;
};

}  // namespace sg::snapshot_read_detail
