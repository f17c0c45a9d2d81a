#include "agent/logs/log_shipper.h"

#include "agent/repo/store_layout.h"
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
    const std::string key = LogSegmentKey(
        job_, LogSegmentName{instance_, generation, s.seq, CompactStamp(s.first_time)});
    auto put = store_.Put(key, *frame, PutCondition::None());
    if (!put.ok()) {
      r.status = put.status();
      break;
    }
    segments_.MarkShipped(s.seq);
    ++r.shipped;
    r.bytes += raw->size();
    r.stored_bytes += frame->size();
    r.newest_key = key;
  }
  return r;
}

}  // namespace sg
