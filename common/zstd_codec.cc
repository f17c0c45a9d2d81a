#include "common/zstd_codec.h"
#include "common/spare_buffer.h"
#include "common/zstd_literal_planes.h"
#include "common/zstd_stream.h"

// ZSTD_d_forceIgnoreChecksum is among zstd's experimental parameters.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace sg {
namespace {

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// One context per thread, reused across frames: creating one costs more than
// compressing a small frame.
ZSTD_CCtx* ThreadCCtx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxDeleter> ctx(ZSTD_createCCtx());
  return ctx.get();
}
ZSTD_DCtx* ThreadDCtx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> ctx(ZSTD_createDCtx());
  return ctx.get();
}
// The streaming decoder's own: its parameters (a stable output buffer) must
// not leak into whole-frame decoding.
ZSTD_DCtx* ThreadStreamDCtx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> ctx(ZSTD_createDCtx());
  return ctx.get();
}

// `raw`, byte planes of width `planes` when above 1 (each plane coded as
// literals only where a probe finds that as small: zstd_literal_planes.h).
StatusOr<std::string> Compress(std::string_view raw, int level, int planes = 1) {
  ZSTD_CCtx* c = ThreadCCtx();
  PlaneLayout layout{raw.data(), raw.size(), raw.size() / planes, planes, 0};
  if (planes > 1) ChooseLiteralPlanes(c, level, layout);
  ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1);
  UseLiteralPlanes(c, layout);
  // From the shared pool: the caller hands it on to a store writer, which
  // gives it back once its bytes are in a part (common/spare_buffer.h).
  std::string out = TakeSharedBuffer(ZSTD_compressBound(raw.size()));
  out.resize(ZSTD_compressBound(raw.size()));
  const size_t n = ZSTD_compress2(c, out.data(), out.size(), raw.data(), raw.size());
  if (ZSTD_isError(n)) return Status::IOError(std::string("zstd: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

// The codec is chosen by the sizes of zstd with its match finder alone,
// shuffled or not (as before literal planes: an all-zero sample codes a
// few bytes smaller as literal planes, which would tip the choice for
// nothing).
size_t CompressedSize(std::string_view raw, int level) {
  auto r = Compress(raw, level);
  if (!r.ok()) return raw.size();
  const size_t size = r->size();
  GiveSharedBuffer(std::move(*r));
  return size;
}

}  // namespace

std::string_view CodecName(Codec codec) {
  switch (codec) {
    case Codec::kNone:
      return "none";
    case Codec::kZstd:
      return "zstd";
    case Codec::kZstdShuffle2:
      return "zstd+shuffle2";
    case Codec::kZstdShuffle4:
      return "zstd+shuffle4";
  }
  return "none";
}

StatusOr<Codec> ParseCodec(std::string_view name) {
  for (Codec c : {Codec::kNone, Codec::kZstd, Codec::kZstdShuffle2, Codec::kZstdShuffle4}) {
    if (CodecName(c) == name) return c;
  }
  return Status::InvalidArgument("unknown codec \"" + std::string(name) + "\"");
}

int ShuffleWidth(Codec codec) {
  switch (codec) {
    case Codec::kZstdShuffle2:
      return 2;
    case Codec::kZstdShuffle4:
      return 4;
    default:
      return 1;
  }
}

StatusOr<std::string> EncodeFrame(Codec codec, std::string_view raw, int level) {
  if (codec == Codec::kNone) {
    std::string out = TakeSharedBuffer(raw.size());
    out.assign(raw);
    return out;
  }
  const int width = ShuffleWidth(codec);
  if (width == 1) return Compress(raw, level);
  thread_local std::string planes;  // reused: a frame is shuffled into it, then compressed
  planes.resize(raw.size());
  ShuffleInto(raw.data(), raw.size(), width, planes.data());
  return Compress(planes, level, width);
}

StatusOr<std::string> DecodeSizedFrame(std::string_view stored, uint64_t max_size) {
  const unsigned long long declared = ZSTD_getFrameContentSize(stored.data(), stored.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR || declared == ZSTD_CONTENTSIZE_UNKNOWN) {
    return Status::Corruption("not a zstd frame that declares its size");
  }
  if (declared > max_size) {
    return Status::Corruption("zstd frame declares " + std::to_string(declared) +
                              " bytes, more than " + std::to_string(max_size));
  }
  return DecodeFrame(Codec::kZstd, stored, declared);
}

Status DecodeZstdInPieces(std::string_view stored, size_t piece,
                          const std::function<Status(std::string_view)>& each) {
  std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx(ZSTD_createDCtx());
  if (!dctx) return Status::IOError("zstd: no decompression context");
  ZSTD_DCtx_setParameter(dctx.get(), ZSTD_d_windowLogMax, kMaxStreamWindowLog);
  std::string buf(piece, '\0');
  ZSTD_inBuffer in{stored.data(), stored.size(), 0};
  bool ended = false;  // the last call that did anything ended a frame
  while (true) {
    ZSTD_outBuffer out{buf.data(), buf.size(), 0};
    const size_t in_before = in.pos;
    const size_t hint = ZSTD_decompressStream(dctx.get(), &out, &in);
    if (ZSTD_isError(hint)) {
      return Status::Corruption(std::string("zstd: ") + ZSTD_getErrorName(hint));
    }
    if (out.pos > 0 || in.pos != in_before) ended = hint == 0;
    if (out.pos > 0) SG_RETURN_IF_ERROR(each(std::string_view(buf.data(), out.pos)));
    // A full buffer may leave more to flush; otherwise only new input helps.
    if (in.pos == in.size && out.pos < out.size) break;
  }
  if (!ended) return Status::Corruption("zstd: the stream ends inside a frame");
  return Status::Ok();
}

StatusOr<std::string> DecodeFrame(Codec codec, std::string_view stored, uint64_t raw_size) {
  std::string out, scratch;
  SG_RETURN_IF_ERROR(DecodeFrameInto(codec, stored, raw_size, &out, &scratch));
  return out;
}

namespace {

// Checks that `stored` is one whole zstd frame of `raw_size` bytes and
// decompresses it into `out` (resized; a reused buffer costs no fill).
Status DecompressFrame(std::string_view stored, uint64_t raw_size, std::string* out) {
  const unsigned long long declared = ZSTD_getFrameContentSize(stored.data(), stored.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR) return Status::Corruption("not a zstd frame");
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != raw_size) {
    return Status::Corruption("zstd frame holds " + std::to_string(declared) + " bytes, expected " +
                              std::to_string(raw_size));
  }
  if (ZSTD_findFrameCompressedSize(stored.data(), stored.size()) != stored.size()) {
    return Status::Corruption("stored frame is truncated or has trailing bytes");
  }
  // resize() fills only bytes past the old size: a reused buffer costs no fill.
  out->resize(raw_size);
  ZSTD_DCtx* dctx = ThreadDCtx();
  const size_t n =
      ZSTD_decompressDCtx(dctx, out->data(), out->size(), stored.data(), stored.size());
  if (ZSTD_isError(n)) return Status::Corruption(std::string("zstd: ") + ZSTD_getErrorName(n));
  if (n != raw_size) return Status::Corruption("zstd frame decoded to the wrong size");
  return Status::Ok();
}

Status CheckStoredSize(std::string_view stored, uint64_t raw_size) {
  if (stored.size() == raw_size) return Status::Ok();
  return Status::Corruption("stored frame has " + std::to_string(stored.size()) +
                            " bytes, expected " + std::to_string(raw_size));
}

}  // namespace

Status DecodeFrameInto(Codec codec, std::string_view stored, uint64_t raw_size, std::string* out,
                       std::string* scratch) {
  if (codec == Codec::kNone) {
    SG_RETURN_IF_ERROR(CheckStoredSize(stored, raw_size));
    out->assign(stored);
    return Status::Ok();
  }
  const int width = ShuffleWidth(codec);
  std::string* planes = width == 1 ? out : scratch;
  SG_RETURN_IF_ERROR(DecompressFrame(stored, raw_size, planes));
  if (width == 1) return Status::Ok();
  out->resize(raw_size);
  UnshuffleInto(planes->data(), raw_size, width, out->data());
  return Status::Ok();
}

namespace {

// Hands the `raw_size` decoded bytes in `whole` (byte planes when shuffled)
// to `each`, at most `piece` at a time (FrameStreamDecoder::Finish).
Status EmitPieces(Codec codec, std::string_view whole, uint64_t raw_size, size_t piece,
                  std::string* piece_buf, const std::function<Status(std::string_view)>& each) {
  const int width = ShuffleWidth(codec);
  piece = std::max<size_t>(piece - piece % 4, 4);  // a multiple of every width
  if (width > 1 && piece_buf->size() < std::min<uint64_t>(piece, raw_size)) {
    piece_buf->resize(std::min<uint64_t>(piece, raw_size));
  }
  for (uint64_t at = 0; at < raw_size; at += piece) {
    const uint64_t end = std::min<uint64_t>(at + piece, raw_size);
    if (width == 1) {
      SG_RETURN_IF_ERROR(each(whole.substr(at, end - at)));
      continue;
    }
    UnshufflePart(whole.data(), raw_size, width, at, end, piece_buf->data());
    SG_RETURN_IF_ERROR(each(std::string_view(piece_buf->data(), end - at)));
  }
  return Status::Ok();
}

}  // namespace

void FrameStreamDecoder::Begin(Codec codec, uint64_t raw_size, bool check_zstd_checksum,
                               std::string* scratch) {
  codec_ = codec;
  raw_size_ = raw_size;
  scratch_ = scratch;
  out_pos_ = 0;
  ended_ = false;
  in_place_ = {};
  if (codec_ == Codec::kNone) {
    ended_ = raw_size == 0;
    return;  // the scratch is sized only when the frame comes in pieces (Feed)
  }
  // resize() fills only bytes past the old size: a reused buffer costs no fill.
  scratch_->resize(raw_size);
  ZSTD_DCtx* dctx = ThreadStreamDCtx();
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_and_parameters);
  // zstd writes into `scratch` where it stands, with no window buffer of its
  // own: the scratch stays put until the frame ends.
  ZSTD_DCtx_setParameter(dctx, ZSTD_d_stableOutBuffer, 1);
  ZSTD_DCtx_setParameter(dctx, ZSTD_d_forceIgnoreChecksum,
                         check_zstd_checksum ? ZSTD_d_validateChecksum : ZSTD_d_ignoreChecksum);
}

Status FrameStreamDecoder::Feed(std::string_view bytes) {
  if (bytes.empty()) return Status::Ok();
  if (ended_) return Status::Corruption("stored frame has trailing bytes");
  if (codec_ == Codec::kNone) {
    if (bytes.size() > raw_size_ - out_pos_) {
      return Status::Corruption("stored frame has more than " + std::to_string(raw_size_) +
                                " bytes");
    }
    if (out_pos_ == 0 && bytes.size() == raw_size_) {
      in_place_ = bytes;  // whole in one piece: used where it lies, not copied
      out_pos_ = raw_size_;
      ended_ = true;
      return Status::Ok();
    }
    if (out_pos_ == 0) scratch_->resize(raw_size_);
    std::memcpy(scratch_->data() + out_pos_, bytes.data(), bytes.size());
    out_pos_ += bytes.size();
    ended_ = out_pos_ == raw_size_;
    return Status::Ok();
  }
  ZSTD_DCtx* dctx = ThreadStreamDCtx();
  ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
  ZSTD_outBuffer out{scratch_->data(), raw_size_, out_pos_};
  while (in.pos < in.size) {
    const size_t in_before = in.pos, out_before = out.pos;
    const size_t r = ZSTD_decompressStream(dctx, &out, &in);
    out_pos_ = out.pos;
    if (ZSTD_isError(r)) return Status::Corruption(std::string("zstd: ") + ZSTD_getErrorName(r));
    if (r == 0) {
      ended_ = true;
      if (in.pos < in.size) return Status::Corruption("stored frame has trailing bytes");
      break;
    }
    if (in.pos == in_before && out.pos == out_before) {
      // Input left, output full: the frame holds more than it should.
      return Status::Corruption("zstd frame holds more than " + std::to_string(raw_size_) +
                                " bytes");
    }
  }
  return Status::Ok();
}

Status FrameStreamDecoder::Finish(size_t piece, std::string* piece_buf,
                                  const std::function<Status(std::string_view)>& each) {
  if (!ended_) {
    return Status::Corruption(codec_ == Codec::kNone
                                  ? "stored frame has " + std::to_string(out_pos_) +
                                        " bytes, expected " + std::to_string(raw_size_)
                                  : std::string("stored frame is truncated"));
  }
  if (out_pos_ != raw_size_) return Status::Corruption("zstd frame decoded to the wrong size");
  const std::string_view whole = in_place_.empty() ? std::string_view(*scratch_) : in_place_;
  return EmitPieces(codec_, whole, raw_size_, piece, piece_buf, each);
}

Codec ChooseCodec(const std::vector<std::string_view>& samples, ShufflePolicy policy, int level) {
  size_t raw = 0, plain = 0, two = 0, four = 0;
  for (std::string_view s : samples) {
    raw += s.size();
    plain += CompressedSize(s, level);
    if (policy == ShufflePolicy::kAuto || policy == ShufflePolicy::kTwo) {
      two += CompressedSize(ShuffleBytes(s, 2), level);
    }
    if (policy == ShufflePolicy::kAuto || policy == ShufflePolicy::kFour) {
      four += CompressedSize(ShuffleBytes(s, 4), level);
    }
  }
  if (raw == 0) return Codec::kZstd;
  // "Saves at least 3%": the candidate is at most 97% of what it replaces.
  auto saves = [](size_t candidate, size_t base) { return candidate * 100 <= base * 97; };
  if (policy == ShufflePolicy::kTwo) return Codec::kZstdShuffle2;
  if (policy == ShufflePolicy::kFour) return Codec::kZstdShuffle4;
  Codec best = Codec::kZstd;
  size_t best_size = plain;
  if (policy == ShufflePolicy::kAuto) {
    const size_t shuffled = std::min(two, four);
    if (saves(shuffled, plain)) {
      best = four <= two ? Codec::kZstdShuffle4 : Codec::kZstdShuffle2;
      best_size = shuffled;
    }
  }
  return saves(best_size, raw) ? best : Codec::kNone;
}

}  // namespace sg
