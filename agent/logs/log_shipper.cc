#include "agent/logs/log_shipper.h"

#include "agent/repo/repository.h"
#include "common/files.h"
#include "common/zstd_codec.h"

namespace sg {

LogShipResult LogShipper::Ship(uint64_t generation, bool seal, const std::atomic<bool>* stop) {
  LogShipResult r;
  if (seal) segments_.Seal();
  for (const SealedSegment& s : segments_.Unshipped()) {
    if (stop && *stop) break;
    auto raw = ReadFileToString(s.path);
    if (!raw.ok()) {
      // Rotated away meanwhile (or unreadable): nothing to ship.
      segments_.MarkShipped(s.seq);
      if (r.status.ok()) r.status = raw.status();
      continue;
    }
    auto frame = EncodeFrame(Codec::kZstd, *raw, kLogSegmentLevel);
    if (!frame.ok()) {
      r.status = frame.status();
      break;
    }
    auto put = Repository::Open(store_, job_).PutLogSegment(
        LogSegmentName{instance_, generation, s.seq, CompactStamp(s.first_time)}, *frame);
    if (!put.ok()) {
      r.status = put.status();
      break;
    }
    segments_.MarkShipped(s.seq);
    ++r.shipped;
    r.bytes += raw->size();
    r.stored_bytes += frame->size();
    r.newest_key = *put;
  }
  return r;
}

}  // namespace sg
