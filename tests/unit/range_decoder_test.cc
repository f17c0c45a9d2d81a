// RangeDecoder (agent/repo/range_decoder.h): a read range's frames decoded,
// checked and written as the stored bytes come, in pieces of any size; a
// range that starts over is written again and reported once; a damaged,
// short or overlong range names the file.
#include "agent/repo/range_decoder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "common/crypto.h"
#include "common/xxh3.h"
#include "tests/support/random_bytes.h"

namespace sg {
namespace {

using testing::RandomBytes;

// A file in memory.
class BufferSink final : public FileSink {
 public:
  explicit BufferSink(uint64_t size) : bytes(size, '\0') {}
  Status WriteAt(uint64_t offset, std::string_view raw) override {
    if (offset + raw.size() > bytes.size()) return Status::IOError("write past the end");
    std::memcpy(bytes.data() + offset, raw.data(), raw.size());
    return Status::Ok();
  }
  Status ReadAt(uint64_t offset, uint64_t length, std::string* out) override {
    out->assign(bytes, offset, length);
    return Status::Ok();
  }
  Status Finish() override { return Status::Ok(); }
  std::string bytes;
};

class RangeDecoderTest : public ::testing::Test {
 protected:
  // `raw` as frames of 64 KiB (zstd+shuffle4) back to back in one object,
  // with frame digests; the range is all of them.
  void SetUp() override {
    raw_ = RandomBytes(200'000, 3) + std::string(150'000, 'r');
    file_.path = "model.pt";
    file_.size = raw_.size();
    file_.key = "objects/model";
    file_.codec = Codec::kZstdShuffle4;
    file_.frame_size = 64 << 10;
    for (uint64_t at = 0; at < raw_.size(); at += file_.frame_size) {
      const std::string_view slice = std::string_view(raw_).substr(at, file_.frame_size);
      const std::string enc = *EncodeFrame(file_.codec, slice, 1);
      file_.frames.push_back(
          FrameRef{file_.key, object_.size(), enc.size(), Sha256Hex(slice), Xxh3Hex(slice)});
      object_ += enc;
    }
    range_.first_frame = 0;
    range_.end_frame = file_.frames.size();
    range_.key = file_.key;
    range_.stored = object_.size();
    range_.raw = raw_.size();
  }

  RangeDecoder::Target Target(FileSink* sink) {
    RangeDecoder::Target t;
    t.file = &file_;
    t.range = &range_;
    t.sink = sink;
    t.frame_digests = true;
    t.written = [this](uint64_t n) { reported_ += n; };
    return t;
  }

  // Feeds `stored` in pieces of `piece` bytes from `from`.
  static Status FeedFrom(RangeDecoder& d, std::string_view stored, uint64_t from, size_t piece) {
    for (uint64_t at = from; at < stored.size(); at += piece) {
      SG_RETURN_IF_ERROR(d.Feed(at, stored.substr(at, piece)));
    }
    return Status::Ok();
  }

  std::string raw_, object_;
  ManifestFile file_;
  ReadRange range_;
  uint64_t reported_ = 0;
};

TEST_F(RangeDecoderTest, PiecesOfAnySizeWriteTheFile) {
  for (size_t piece : {1u, 333u, 65'536u, 1u << 20}) {
    BufferSink sink(raw_.size());
    reported_ = 0;
    RangeDecoder d(Target(&sink));
    ASSERT_TRUE(FeedFrom(d, object_, 0, piece).ok()) << piece;
    ASSERT_TRUE(d.Finish().ok()) << piece;
    EXPECT_TRUE(sink.bytes == raw_) << "pieces of " << piece;
    EXPECT_EQ(reported_, raw_.size());
  }
}

// A retried read hands the range over again from offset 0: the frames are
// written again, to the same bytes, and each is reported once.
TEST_F(RangeDecoderTest, ARangeThatStartsOverIsWrittenAgainAndReportedOnce) {
  BufferSink sink(raw_.size());
  RangeDecoder d(Target(&sink));
  ASSERT_TRUE(d.Feed(0, std::string_view(object_).substr(0, object_.size() * 2 / 3)).ok());
  EXPECT_GT(reported_, 0u) << "some frames were done before the cut";
  ASSERT_TRUE(FeedFrom(d, object_, 0, 10'000).ok());
  ASSERT_TRUE(d.Finish().ok());
  EXPECT_TRUE(sink.bytes == raw_);
  EXPECT_EQ(reported_, raw_.size());
  EXPECT_TRUE(d.error().ok());
}

TEST_F(RangeDecoderTest, ADamagedFrameNamesTheFileAndTheFrame) {
  std::string damaged = object_;
  const FrameRef& third = file_.frames[2];
  damaged[third.offset + third.stored / 2] ^= 0x40;
  BufferSink sink(raw_.size());
  RangeDecoder d(Target(&sink));
  Status st = FeedFrom(d, damaged, 0, 4096);
  ASSERT_TRUE(st.Is(StatusCode::kCorruption)) << st.ToString();
  EXPECT_NE(st.message().find("file \"model.pt\": frame 2 of objects/model"), std::string::npos)
      << st.message();
  EXPECT_EQ(d.error().message(), st.message());
}

TEST_F(RangeDecoderTest, AShortOrOverlongRangeNamesTheFile) {
  {
    BufferSink sink(raw_.size());
    RangeDecoder d(Target(&sink));
    ASSERT_TRUE(d.Feed(0, std::string_view(object_).substr(0, object_.size() - 10)).ok());
    Status st = d.Finish();
    EXPECT_TRUE(st.Is(StatusCode::kCorruption));
    EXPECT_NE(st.message().find("\"model.pt\""), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("shorter than the manifest says"), std::string::npos);
  }
  {
    BufferSink sink(raw_.size());
    RangeDecoder d(Target(&sink));
    Status st = d.Feed(0, object_ + "more");
    EXPECT_TRUE(st.Is(StatusCode::kCorruption)) << st.ToString();
    EXPECT_NE(st.message().find("more bytes than the manifest says"), std::string::npos)
        << st.message();
  }
  {
    BufferSink sink(raw_.size());
    RangeDecoder d(Target(&sink));
    ASSERT_TRUE(d.Feed(0, std::string_view(object_).substr(0, 100)).ok());
    EXPECT_FALSE(d.Feed(200, std::string_view(object_).substr(200, 100)).ok()) << "a gap";
  }
}

// A range hashed in order (format 1) cannot take its bytes twice.
TEST_F(RangeDecoderTest, AnInOrderHashedRangeRefusesToStartOver) {
  Sha256Stream sha;
  RangeDecoder::Target t = Target(nullptr);
  t.inline_sha = &sha;
  RangeDecoder d(t);
  ASSERT_TRUE(d.Feed(0, std::string_view(object_).substr(0, 1000)).ok());
  EXPECT_FALSE(d.Feed(0, object_).ok());
}

}  // namespace
}  // namespace sg
