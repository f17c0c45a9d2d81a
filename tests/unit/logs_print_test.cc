// `spotguard logs` printing stored segments (docs/design.md §13): stored
// bytes never reach the terminal raw, and a segment that decodes to far more
// than it stores is printed piece by piece with bounded memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <streambuf>

#include "agent/logs/log_store.h"
#include "agent/cli/logs_command.h"
#include "agent/repo/store_layout.h"
#include "common/file_store.h"
#include "common/log_lines.h"
#include "common/zstd_codec.h"
#include "common/zstd_stream.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

using testing::TempDir;

TEST(EscapeControls, TerminalControlsAreEscapedAndCapturedTextComesOutUnchanged) {
  // The window title, a cleared screen, a bell, CSI as a C1 control (U+009B),
  // a raw byte that is not UTF-8, DEL.
  EXPECT_EQ(EscapeControls("\x1b]0;pwned\x07"), "\\x1b]0;pwned\\x07");
  EXPECT_EQ(EscapeControls("\x1b[2J\x1b[H"), "\\x1b[2J\\x1b[H");
  EXPECT_EQ(EscapeControls("a\xc2\x9b"
                           "2Jb"),
            "a\\xc2\\x9b2Jb");
  EXPECT_EQ(EscapeControls("\x9b\x7f\r"), "\\x9b\\x7f\\x0d");
  // Tab, UTF-8 text (U+00A0 and up) and backslashes are kept.
  EXPECT_EQ(EscapeControls("step\t1 é ✓ \xc2\xa0 \\x1b"), "step\t1 é ✓ \xc2\xa0 \\x1b");
  // What the capture wrote is already safe: printing it changes nothing.
  const std::string captured = EscapeLogText("bad \x1b[2J \\ byte \xff");
  EXPECT_EQ(EscapeControls(captured), captured);
}

// 1024 frames of 1 MiB of zeros, one after another: a few KB stored.
std::string Bomb(size_t frames, const std::string& raw) {
  auto frame = EncodeFrame(Codec::kZstd, raw, 3);
  EXPECT_TRUE(frame.ok());
  std::string out;
  for (size_t i = 0; i < frames; ++i) out += *frame;
  return out;
}

TEST(DecodeZstdInPieces, AGibibyteFromAFewKilobytesIsHandedOnInBoundedPieces) {
  const std::string bomb = Bomb(1024, std::string(size_t{1} << 20, '\0'));
  ASSERT_LT(bomb.size(), size_t{100} << 10);
  uint64_t total = 0;
  size_t largest = 0;
  const Status st = DecodeZstdInPieces(bomb, size_t{64} << 10, [&](std::string_view piece) {
    total += piece.size();
    largest = std::max(largest, piece.size());
    return Status::Ok();
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(total, uint64_t{1} << 30);
  EXPECT_LE(largest, size_t{64} << 10);
}

TEST(DecodeZstdInPieces, ATruncatedStreamOrGarbageIsCorruption) {
  auto frame = EncodeFrame(Codec::kZstd, std::string(100000, 'a'), 3);
  ASSERT_TRUE(frame.ok());
  auto ignore = [](std::string_view) { return Status::Ok(); };
  EXPECT_EQ(DecodeZstdInPieces(frame->substr(0, frame->size() - 3), 4096, ignore).code(),
            StatusCode::kCorruption);
  EXPECT_EQ(DecodeZstdInPieces("not zstd", 4096, ignore).code(), StatusCode::kCorruption);
}

// Records the largest single write it was handed and counts the lines.
class MeasuringBuf final : public std::streambuf {
 public:
  size_t largest = 0;
  uint64_t bytes = 0;
  uint64_t lines = 0;

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    largest = std::max(largest, static_cast<size_t>(n));
    bytes += static_cast<uint64_t>(n);
    lines += static_cast<uint64_t>(std::count(s, s + n, '\n'));
    return n;
  }
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) {
      bytes += 1;
      lines += c == '\n' ? 1 : 0;
    }
    return c;
  }
};

TEST(PrintLogSegment, ASegmentThatDecodesToFarMoreThanItStoresIsPrintedWithBoundedMemory) {
  TempDir dir;
  auto store = FileStore::Open(dir.Join("store"));
  ASSERT_TRUE(store.ok());
  // First a line of 8 MiB (no newline for 8 frames), then 56 MiB of lines
  // of 1 KiB: 64 frames of 1 MiB, stored in some 100 KB.
  const std::string head = "2026-11-22T08:22:00.000Z trainer.out ";
  std::string first(size_t{1} << 20, 'x');
  first.replace(0, head.size(), head);
  std::string line = head + std::string(1024 - head.size() - 1, 'y') + "\n";
  std::string lines = "\n";  // ends the line before
  while (lines.size() + line.size() <= (size_t{1} << 20)) lines += line;
  lines.resize(size_t{1} << 20, 'z');  // a tail that is not a log line
  auto long_frame = EncodeFrame(Codec::kZstd, std::string(size_t{1} << 20, 'x'), 3);
  ASSERT_TRUE(long_frame.ok());
  std::string stored = Bomb(1, first);
  for (int i = 0; i < 7; ++i) stored += *long_frame;
  stored += Bomb(56, lines);
  ASSERT_LT(stored.size(), size_t{1} << 20);
  const std::string key = LogSegmentKey("job", {"i-a", 1, 1, "20261122T082200.000Z"});
  ASSERT_TRUE((*store)->Put(key, stored, PutCondition::None()).ok());

  MeasuringBuf buf;
  std::ostream out(&buf);
  const LogPrintLimits limits;
  auto printed = PrintLogSegment(**store, StoredLogSegment{key, *ParseLogSegmentKey("job", key)},
                                 "", false, out, limits);
  ASSERT_TRUE(printed.ok()) << printed.status().ToString();
  // The long line, cut, and every whole line of 1 KiB.
  const uint64_t per_frame = ((size_t{1} << 20) - 1) / line.size();
  ASSERT_EQ(per_frame, 1023u);
  EXPECT_EQ(*printed, 1 + 56 * per_frame);
  EXPECT_EQ(buf.lines, *printed);
  // No piece of output larger than the longest line kept: the 8 MiB line
  // was never gathered whole.
  EXPECT_LE(buf.largest, limits.max_line);
  EXPECT_GT(buf.largest, size_t{64} << 10);  // the cut line's head, printed
}

}  // namespace
}  // namespace sg
