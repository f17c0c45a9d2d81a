// The log capture's parts (docs/design.md §13): lines cut and escaped, the
// rotating segment files and their bound, a full log disk, and the order
// of the shipped segments.
#include "agent/logs/log_capture.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "agent/config/config.h"
#include "agent/logs/log_shipper.h"
#include "agent/logs/log_store.h"
#include "agent/cli/logs_command.h"
#include "agent/repo/store_layout.h"
#include "common/file_store.h"
#include "common/files.h"
#include "common/log_lines.h"
#include "common/log_segments.h"
#include "common/zstd_codec.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

using testing::TempDir;

LogSegmentOptions Options(const std::string& dir, uint64_t segment_bytes, int max_segments) {
  LogSegmentOptions o;
  o.dir = dir;
  o.segment_bytes = segment_bytes;
  o.max_segments = max_segments;
  return o;
}

std::vector<std::string> SegmentFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(LineSplitter, AHundredMegabyteLineIsCutAndMemoryStaysBounded) {
  LineSplitter splitter;
  std::vector<std::pair<std::string, bool>> lines;
  auto emit = [&](std::string_view line, bool cut) { lines.emplace_back(std::string(line), cut); };
  splitter.Feed("before\n", emit);
  const std::string chunk(1 << 20, 'x');
  size_t most_buffered = 0;
  for (int i = 0; i < 100; ++i) {
    splitter.Feed(chunk, emit);
    most_buffered = std::max(most_buffered, splitter.buffered());
  }
  splitter.Feed("\nafter\n", emit);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], std::make_pair(std::string("before"), false));
  EXPECT_EQ(lines[1].first, std::string(kMaxLogLineBytes, 'x'));
  EXPECT_TRUE(lines[1].second);
  EXPECT_EQ(lines[2], std::make_pair(std::string("after"), false));
  EXPECT_LE(most_buffered, kMaxLogLineBytes);
  EXPECT_EQ(splitter.dropped_bytes(), (uint64_t{100} << 20) - kMaxLogLineBytes);
}

TEST(LineSplitter, AStreamWithoutAFinalNewlineEndsWithItsLastLine) {
  LineSplitter splitter(8);
  std::vector<std::string> lines;
  auto emit = [&](std::string_view line, bool) { lines.emplace_back(line); };
  splitter.Feed("ab\ncd", emit);
  splitter.Finish(emit);
  EXPECT_EQ(lines, (std::vector<std::string>{"ab", "cd"}));
}

TEST(EscapeLogText, BinaryGarbageBecomesPrintableAndValidUtf8IsKept) {
  EXPECT_EQ(EscapeLogText("plain\ttext é ✓"), "plain\ttext é ✓");
  EXPECT_EQ(EscapeLogText(std::string("a\0b\r\x1b[1m\\", 9)), "a\\x00b\\x0d\\x1b[1m\\\\");
  EXPECT_EQ(EscapeLogText("\xff\xc3"), "\\xff\\xc3");           // invalid, truncated
  EXPECT_EQ(EscapeLogText("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  const std::string escaped = EscapeLogText(all);
  EXPECT_EQ(escaped.find('\n'), std::string::npos);
}

TEST(LogLines, AFormattedLineParsesBack) {
  const std::string line = FormatLogLine("2026-11-22T08:22:00.123Z", "trainer.out", "a b  c");
  EXPECT_EQ(line, "2026-11-22T08:22:00.123Z trainer.out a b  c\n");
  auto parsed = ParseLogLine(std::string_view(line).substr(0, line.size() - 1));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->time, "2026-11-22T08:22:00.123Z");
  EXPECT_EQ(parsed->source, "trainer.out");
  EXPECT_EQ(parsed->text, "a b  c");
  EXPECT_FALSE(ParseLogLine("garbage").has_value());
}

TEST(LogSegments, RotationKeepsTheFilesWithinTheirBound) {
  TempDir dir;
  auto segments = LogSegments::Open(Options(dir.Join("logs"), 1000, 4));
  ASSERT_TRUE(segments.ok()) << segments.status().ToString();
  const std::string line = FormatLogLine("2026-11-22T08:22:00.123Z", "agent", std::string(60, 'y'));
  for (int i = 0; i < 1000; ++i) (*segments)->Append(line);
  const auto files = SegmentFiles(dir.Join("logs"));
  EXPECT_EQ(files.size(), 4u);
  for (const std::string& f : files) EXPECT_LE(std::filesystem::file_size(f), 1000u) << f;
  // Nothing was shipped: every segment rotated away is counted as lost.
  const LogSegmentStats stats = (*segments)->stats();
  EXPECT_EQ(stats.written_bytes, 1000u * line.size());
  EXPECT_GT(stats.unshipped_removed, 0u);
  EXPECT_EQ(stats.dropped_lines, 0u);
  // What is left is offered oldest first, the current segment after a seal.
  (*segments)->Seal();
  const auto unshipped = (*segments)->Unshipped();
  ASSERT_EQ(unshipped.size(), 4u);
  for (size_t i = 1; i < unshipped.size(); ++i) EXPECT_LT(unshipped[i - 1].seq, unshipped[i].seq);
  EXPECT_EQ(unshipped.front().first_time, "2026-11-22T08:22:00.123Z");
}

TEST(LogSegments, AFullDiskDropsLinesCountsThemAndReportsOnce) {
  TempDir dir;
  bool full = false;
  std::vector<std::string> reports;
  LogSegmentOptions options = Options(dir.Join("logs"), 1 << 20, 4);
  options.write = [&](int fd, const char* data, size_t n) -> ssize_t {
    if (full) {
      errno = ENOSPC;
      return -1;
    }
    return ::write(fd, data, n);
  };
  auto segments = LogSegments::Open(options);
  ASSERT_TRUE(segments.ok());
  (*segments)->set_on_drop([&](const std::string& what) { reports.push_back(what); });
  const std::string line = FormatLogLine("2026-11-22T08:22:00.123Z", "trainer.out", "step");
  (*segments)->Append(line);
  full = true;
  for (int i = 0; i < 50; ++i) (*segments)->Append(line);  // never throws, never blocks
  full = false;
  (*segments)->Append(line);
  const LogSegmentStats stats = (*segments)->stats();
  EXPECT_EQ(stats.dropped_lines, 50u);
  EXPECT_EQ(stats.dropped_bytes, 50u * line.size());
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_NE(reports[0].find("No space left on device"), std::string::npos) << reports[0];
  EXPECT_NE(reports[1].find("resumed; 50 line(s)"), std::string::npos) << reports[1];
  (*segments)->Seal();
  auto text = ReadFileToString((*segments)->Unshipped().front().path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, line + line);
}

// A real full file system: a 64 KiB tmpfs (needs root; skipped without).
TEST(LogSegments, ARealFullFileSystemNeverStopsTheWriter) {
  TempDir dir;
  const std::string mnt = dir.Join("tiny");
  std::filesystem::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};
  {
    auto segments = LogSegments::Open(Options(mnt + "/logs", 16 << 10, 16));
    ASSERT_TRUE(segments.ok());
    const std::string line =
        FormatLogLine("2026-11-22T08:22:00.123Z", "trainer.out", std::string(1000, 'z'));
    for (int i = 0; i < 400; ++i) (*segments)->Append(line);  // 400 kB into 64 kB
    const LogSegmentStats stats = (*segments)->stats();
    EXPECT_GT(stats.dropped_lines, 0u);
    EXPECT_LE(stats.written_bytes, 64u << 10);
    EXPECT_EQ(stats.written_bytes + stats.dropped_bytes, 400u * line.size());
  }
}

TEST(LogSegmentKeys, NameOrderIsAttemptThenSeqAndKeysParseBack) {
  const LogSegmentName a{"i-0abc", 3, 12, "20261122T082200.123Z"};
  const std::string key = LogSegmentKey("job", a);
  EXPECT_EQ(key, "job/logs/i-0abc/0000000003-0000000012-20261122T082200.123Z.log.zst");
  auto back = ParseLogSegmentKey("job", key);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->instance, "i-0abc");
  EXPECT_EQ(back->generation, 3u);
  EXPECT_EQ(back->seq, 12u);
  EXPECT_EQ(back->stamp, "20261122T082200.123Z");
  EXPECT_LT(key, LogSegmentKey("job", {"i-0abc", 3, 13, "20261122T082100.000Z"}));
  EXPECT_LT(key, LogSegmentKey("job", {"i-0abc", 4, 1, "20261122T080000.000Z"}));
  EXPECT_FALSE(ParseLogSegmentKey("job", "job/logs/i-0abc/garbage.log.zst").has_value());
  EXPECT_FALSE(ParseLogSegmentKey("job", "other/logs/i-0abc/" + key.substr(16)).has_value());
}

class ShippedLogs : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = FileStore::Open(dir_.Join("store"));
    ASSERT_TRUE(store.ok());
    store_ = std::move(*store);
  }
  void Put(const std::string& instance, uint64_t gen, uint64_t seq, const std::string& text) {
    auto frame = EncodeFrame(Codec::kZstd, text, 3);
    ASSERT_TRUE(frame.ok());
    ASSERT_TRUE(store_
                    ->Put(LogSegmentKey("job", {instance, gen, seq, "20261122T082200.000Z"}),
                          *frame, PutCondition::None())
                    .ok());
  }
  TempDir dir_;
  std::unique_ptr<FileStore> store_;
};

TEST_F(ShippedLogs, SegmentsAreListedInAttemptAndSeqOrderAcrossInstances) {
  // Byte order of the keys would put i-b's attempt 2 after i-a's attempt 10,
  // and seq 10 of an instance before seq 9 of another.
  Put("i-b", 2, 9, "");
  Put("i-a", 10, 1, "");
  Put("i-b", 2, 10, "");
  Put("i-a", 9, 3, "");
  auto all = ListLogSegments(*store_, "job");
  ASSERT_TRUE(all.ok());
  std::vector<std::pair<uint64_t, uint64_t>> order;
  for (const auto& s : *all) order.emplace_back(s.name.generation, s.name.seq);
  EXPECT_EQ(order, (std::vector<std::pair<uint64_t, uint64_t>>{{2, 9}, {2, 10}, {9, 3}, {10, 1}}));
  // Without a choice, the newest attempt; --instance takes all of its attempts.
  LogsOptions by_attempt, by_instance;
  by_attempt.attempt = 2;
  by_instance.instance = "i-a";
  EXPECT_EQ(SelectLogSegments(*all, LogsOptions()).size(), 1u);
  EXPECT_EQ(SelectLogSegments(*all, by_attempt).size(), 2u);
  EXPECT_EQ(SelectLogSegments(*all, by_instance).size(), 2u);
  auto newest = NewestLogSegment(*store_, "job");
  ASSERT_TRUE(newest.ok() && newest->has_value());
  EXPECT_EQ((*newest)->name.generation, 10u);
}

TEST_F(ShippedLogs, RetentionKeepsTheNewestAttempts) {
  for (uint64_t gen : {1, 2, 3, 4}) {
    Put("i-a", gen, 1, "");
    Put("i-a", gen, 2, "");
  }
  auto pruned = PruneLogs(*store_, "job", 2);
  ASSERT_TRUE(pruned.ok());
  EXPECT_EQ(pruned->attempts_removed, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(pruned->objects_deleted, 4u);
  auto all = ListLogSegments(*store_, "job");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ(all->front().name.generation, 3u);
}

TEST_F(ShippedLogs, ShippingPutsOneObjectPerSealedSegmentAndReadsBackInOrder) {
  auto segments = LogSegments::Open(Options(dir_.Join("logs"), 1 << 20, 8));
  ASSERT_TRUE(segments.ok());
  LogShipper shipper(*store_, **segments, "job", "i-a");
  // Ten intervals with output, two without: ten PUTs, one per interval.
  int puts = 0;
  for (int i = 0; i < 12; ++i) {
    if (i < 10) {
      (*segments)->Append(FormatLogLine("2026-11-22T08:22:0" + std::to_string(i % 10) + ".000Z",
                                        "trainer.out", "line " + std::to_string(i)));
    }
    LogShipResult r = shipper.Ship(7);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    puts += r.shipped;
  }
  EXPECT_EQ(puts, 10);
  auto all = ListLogSegments(*store_, "job");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 10u);
  std::ostringstream out;
  for (const auto& s : *all) ASSERT_TRUE(PrintLogSegment(*store_, s, "", false, out).ok());
  std::string expected;
  for (int i = 0; i < 10; ++i) {
    expected += "2026-11-22T08:22:0" + std::to_string(i) + ".000Z #7 trainer.out line " +
                std::to_string(i) + "\n";
  }
  EXPECT_EQ(out.str(), expected);
  // --since drops older lines.
  std::ostringstream since;
  ASSERT_TRUE(PrintLogSegment(*store_, all->back(), "2026-11-22T08:22:09.500Z", false, since).ok());
  EXPECT_EQ(since.str(), "");
}

}  // namespace
}  // namespace sg

namespace sg {
namespace {

Config LoadWith(std::map<std::string, std::string> flags, std::vector<ConfigProblem>* problems) {
  ConfigSources sources;
  flags["job"] = "job";
  flags["checkpoint_dir"] = "/data/run/ckpt";
  sources.flags = flags;
  ConfigResult r = LoadConfig(sources, ConfigNeeds{});
  if (problems) *problems = r.problems;
  return r.config;
}

TEST(LogDir, ConfiguredOrSystemdsOrBesideTheCheckpointDir) {
  const Config plain = LoadWith({}, nullptr);
  EXPECT_EQ(LogDirOf(plain, {}), "/data/run/.spotguard-logs-job");
  EXPECT_EQ(LogDirOf(plain, {{"LOGS_DIRECTORY", "/var/log/spotguard"}}), "/var/log/spotguard/job");
  EXPECT_EQ(LogDirOf(plain, {{"LOGS_DIRECTORY", "/var/log/a:/var/log/b"}}), "/var/log/a/job");
  const Config set = LoadWith({{"log_dir", "/srv/logs/"}}, nullptr);
  EXPECT_EQ(LogDirOf(set, {{"LOGS_DIRECTORY", "/var/log/spotguard"}}), "/srv/logs");
  EXPECT_EQ(set.log_ship_interval, std::chrono::seconds(60));
  EXPECT_EQ(set.log_max_mib, 64);
  EXPECT_EQ(set.logs_keep, 10);
}

TEST(LogDir, BadLogSettingsAreRefusedNamingTheKey) {
  std::vector<ConfigProblem> problems;
  LoadWith({{"logs_keep", "0"}, {"log_max_mib", "1"}, {"log_ship_interval", "0"}}, &problems);
  std::string all;
  for (const ConfigProblem& p : problems) all += p.message + "\n";
  EXPECT_NE(all.find("logs_keep: must be at least 1"), std::string::npos) << all;
  EXPECT_NE(all.find("log_max_mib: must be at least 2"), std::string::npos) << all;
  EXPECT_NE(all.find("log_ship_interval: must be longer than 0"), std::string::npos) << all;
  LoadWith({{"log_dir", "/data/run/ckpt/logs"}}, &problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].message.find("log_dir: must not be inside checkpoint_dir (/data/run/ckpt)"),
            std::string::npos)
      << problems[0].message;
  LoadWith({{"log_dir", "/data/run/ckpt-logs"}}, &problems);
  EXPECT_TRUE(problems.empty());
}

}  // namespace
}  // namespace sg
