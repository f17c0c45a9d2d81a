#include "agent/repo/range_decoder.h"

#include <optional>

#include "common/xxh3.h"

namespace sg {
namespace {

// A worker's buffers, kept across the frames it decodes.
struct DecodeBuffers {
  std::string planes;  // one decoded frame (byte planes when shuffled)
  std::string piece;   // one un-shuffled piece of it
};

DecodeBuffers& Buffers() {
  thread_local DecodeBuffers buffers;
  return buffers;
}

// The check of one frame's decoded bytes against its manifest digests:
// XXH3-128 when the manifest gives it, SHA-256 otherwise; `thorough`
// (verify) checks both. No frame digests (format 1): nothing to check here.
class FrameCheck {
 public:
  FrameCheck(const FrameRef* ref, bool thorough) : ref_(ref) {
    if (!ref_) return;
    const bool has_xxh3 = !ref_->xxh3.empty();
    if (has_xxh3) xxh3_.emplace();
    if (!has_xxh3 || thorough) sha_.emplace();
  }

  void Update(std::string_view piece) {
    if (xxh3_) xxh3_->Update(piece);
    if (sha_) sha_->Update(piece);
  }

  Status Finish() {
    if (xxh3_ && xxh3_->FinishHex() != ref_->xxh3) return Status::Corruption("XXH3-128 does not match");
    if (sha_ && sha_->FinishHex() != ref_->sha256) return Status::Corruption("SHA-256 does not match");
    return Status::Ok();
  }

 private:
  const FrameRef* ref_;
  std::optional<Xxh3Stream> xxh3_;
  std::optional<Sha256Stream> sha_;
};

}  // namespace

RangeDecoder::RangeDecoder(Target target)
    : t_(std::move(target)), frame_(t_.range->first_frame), reported_(t_.range->first_frame) {}

Status RangeDecoder::Damaged(const std::string& what) const {
  return Status::Corruption("file \"" + t_.file->path + "\": " + what);
}

Status RangeDecoder::Feed(uint64_t offset, std::string_view bytes) {
  if (offset == 0 && received_ > 0) {
    if (t_.inline_sha != nullptr) {
      error_ = Status::IOError("a range hashed in order cannot start over");
      return error_;
    }
    // Started over (a retried read): its frames are decoded and written again.
    frame_ = t_.range->first_frame;
    in_frame_ = 0;
    received_ = 0;
    error_ = Status::Ok();
  }
  if (offset != received_) {
    error_ = Status::IOError("range bytes at " + std::to_string(offset) + " after " +
                              std::to_string(received_));
    return error_;
  }
  received_ += bytes.size();
  Status st = FeedFrames(bytes);
  if (!st.ok()) error_ = st;
  return st;
}

Status RangeDecoder::FeedFrames(std::string_view bytes) {
  const ManifestFile& file = *t_.file;
  const ReadRange& range = *t_.range;
  while (!bytes.empty()) {
    if (frame_ == range.end_frame) {
      return Damaged("object " + range.key + " holds more bytes than the manifest says");
    }
    const FrameRef& ref = file.frames[frame_];
    if (in_frame_ == 0) {
      decoder_.Begin(file.codec, file.FrameRawSize(frame_), /*check_zstd_checksum=*/t_.thorough,
                     &Buffers().planes);
    }
    const uint64_t take = std::min<uint64_t>(bytes.size(), ref.stored - in_frame_);
    Status st = decoder_.Feed(bytes.substr(0, take));
    if (!st.ok()) {
      return Damaged("frame " + std::to_string(frame_) + " of " + range.key + ": " + st.message());
    }
    in_frame_ += take;
    bytes.remove_prefix(take);
    if (in_frame_ == ref.stored) SG_RETURN_IF_ERROR(EndFrame());
  }
  return Status::Ok();
}

// Checks the frame just fed and writes it at its place, a piece at a time,
// hashing the pieces as they pass; a frame whose digest does not match
// fails the file. Its pieces may have been written by then: restore writes
// into a temporary directory that a failure discards (docs/design.md §7).
Status RangeDecoder::EndFrame() {
  const ManifestFile& file = *t_.file;
  const size_t i = frame_;
  FrameCheck check(t_.frame_digests ? &file.frames[i] : nullptr, t_.thorough);
  uint64_t offset = i * file.frame_size;
  Status write_st;
  Status st = decoder_.Finish(kWritePiece, &Buffers().piece, [&](std::string_view piece) {
    check.Update(piece);
    if (t_.inline_sha) t_.inline_sha->Update(piece);
    if (t_.sink) write_st = t_.sink->WriteAt(offset, piece);
    offset += piece.size();
    return write_st;
  });
  SG_RETURN_IF_ERROR(write_st);
  if (st.ok()) st = check.Finish();
  if (!st.ok()) {
    return Damaged("frame " + std::to_string(i) + " of " + t_.range->key + ": " + st.message());
  }
  if (i >= reported_) {
    reported_ = i + 1;
    if (t_.written) t_.written(file.FrameRawSize(i));
  }
  ++frame_;
  in_frame_ = 0;
  return Status::Ok();
}

Status RangeDecoder::Finish() const {
  if (frame_ == t_.range->end_frame) return Status::Ok();
  return Damaged("object " + t_.range->key + " is shorter than the manifest says");
}

}  // namespace sg
