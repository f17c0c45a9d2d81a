// A writer that rewrites a checkpoint file in place while its capture is read
// (tests/tools/writers/inplace_rewriter.py): Verify() catches it, and bytes
// that pass Verify() are always a version the writer finished.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "agent/capture.h"
#include "agent/presets.h"
#include "common/files.h"
#include "tests/detection/writer_process.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

constexpr size_t kSize = 512 * 1024;
constexpr size_t kChunk = 64 * 1024;

// What inplace_rewriter.py writes as version k (writer_common.payload).
std::string Version(int k) {
  const std::string unit = "v" + std::to_string(k) + "|";
  std::string out;
  while (out.size() < kSize) out += unit;
  out.resize(kSize);
  return out;
}

// The version whose bytes these are exactly, or -1 for a mix (a torn read).
int VersionOf(const std::string& bytes) {
  if (!bytes.starts_with("v")) return -1;
  const size_t bar = bytes.find('|');
  if (bar == std::string::npos) return -1;
  const int k = std::stoi(bytes.substr(1, bar - 1));
  return bytes == Version(k) ? k : -1;
}

std::set<int> FinishedVersions(const std::string& log) {
  std::set<int> out;
  std::ifstream in(log);
  for (int k; in >> k;) out.insert(k);
  return out;
}

// A checkpoint of one file, as the detector would report it right now.
Checkpoint DetectedNow(const std::string& dir, const std::string& name) {
  struct stat st {};
  EXPECT_EQ(::stat((dir + "/" + name).c_str(), &st), 0);
  Checkpoint c;
  c.id = c.resume = name;
  c.relpaths = {name};
  c.newest_mtime = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  return c;
}

std::string ReadRange(const std::string& path, uint64_t offset, uint64_t length) {
  auto fd = OpenFile(path, O_RDONLY);
  EXPECT_TRUE(fd.ok()) << fd.status().ToString();
  if (!fd.ok()) return "";
  auto bytes = PreadUpTo(fd->get(), offset, length, path);
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : "";
}

TEST(Tearing, VerifyFailsWhenTheFileIsRewrittenInPlaceWhileItIsRead) {
  TempDir tmp;
  const std::string dir = tmp.Join("ckpt");
  std::filesystem::create_directories(dir);
  WriterProcess writer(
      "inplace_rewriter.py",
      {"--dir", dir, "--file", "last.pt", "--versions", "1", "--size", std::to_string(kSize),
       "--chunk", std::to_string(kChunk), "--log", tmp.Join("log")},
      {"before-rewrite-1", "mid-rewrite-1"});
  ASSERT_TRUE(writer.WaitAt("before-rewrite-1"));  // version 0 complete and closed

  auto captured =
      CapturedCheckpoint::Capture(dir, DetectedNow(dir, "last.pt"), tmp.Join("staging"));
  ASSERT_TRUE(captured.ok()) << captured.status().ToString();
  const std::string staged = captured->files()[0].staged_path;
  ASSERT_TRUE(captured->files()[0].linked);

  // Read the tail, let the writer put the first chunk of version 1 over
  // version 0 in place, then read the head: the bytes are torn.
  std::string tail = ReadRange(staged, kChunk, kSize - kChunk);
  writer.Release("before-rewrite-1");
  ASSERT_TRUE(writer.WaitAt("mid-rewrite-1"));
  std::string bytes = ReadRange(staged, 0, kChunk) + tail;
  EXPECT_EQ(bytes.size(), kSize);
  EXPECT_EQ(VersionOf(bytes), -1) << "the read was expected to mix versions 0 and 1";

  Status verified = captured->Verify();
  EXPECT_TRUE(verified.Is(StatusCode::kUnavailable)) << verified.ToString();
  EXPECT_NE(verified.message().find("last.pt"), std::string::npos) << verified.message();
  EXPECT_NE(verified.message().find("rewritten in place"), std::string::npos);

  writer.Release("mid-rewrite-1");
  ASSERT_TRUE(writer.WaitDone());
}

TEST(Tearing, BytesThatPassVerifyAreAlwaysAVersionTheWriterFinished) {
  TempDir tmp;
  const std::string dir = tmp.Join("ckpt");
  const std::string log = tmp.Join("log");
  std::filesystem::create_directories(dir);
  // Rewrites take about 16 ms (8 chunks, 2 ms apart) with 30 ms pauses, so
  // some reads overlap a rewrite and some do not.
  WriterProcess writer("inplace_rewriter.py",
                       {"--dir", dir, "--file", "last.pt", "--size", std::to_string(kSize),
                        "--chunk", std::to_string(kChunk), "--chunk-delay", "0.002", "--pause",
                        "0.03", "--log", log, "--stop-file", tmp.Join("stop")});
  while (!std::filesystem::exists(log) || FinishedVersions(log).empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  int verified = 0, rejected_at_capture = 0, rejected_at_verify = 0;
  std::set<int> versions_seen;
  for (int attempt = 0; attempt < 400; ++attempt) {
    if (attempt >= 60 && verified > 0 && rejected_at_verify > 0) break;
    auto captured =
        CapturedCheckpoint::Capture(dir, DetectedNow(dir, "last.pt"), tmp.Join("staging"));
    if (!captured.ok()) {
      ASSERT_TRUE(captured.status().Is(StatusCode::kUnavailable)) << captured.status().ToString();
      ++rejected_at_capture;  // changed since detected: take the next state
      continue;
    }
    // Read the staged bytes the way an upload does: in parts, over time.
    std::string bytes;
    for (uint64_t off = 0; off < kSize; off += 2 * kChunk) {
      bytes += ReadRange(captured->files()[0].staged_path, off, 2 * kChunk);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (!captured->Verify().ok()) {
      ++rejected_at_verify;  // discarded; the next attempt takes the next state
      continue;
    }
    ++verified;
    const int k = VersionOf(bytes);
    ASSERT_GE(k, 0) << "bytes that passed Verify() mix versions (attempt " << attempt << ")";
    // Version k was finished: the writer logs it right after closing the file.
    std::set<int> finished;
    for (int i = 0; i < 200 && !finished.count(k); ++i) {
      finished = FinishedVersions(log);
      if (!finished.count(k)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_TRUE(finished.count(k)) << "version " << k << " passed Verify() but never finished";
    versions_seen.insert(k);
  }
  std::ofstream(tmp.Join("stop")).close();
  ASSERT_TRUE(writer.WaitDone());

  RecordProperty("verified", verified);
  RecordProperty("rejected_at_capture", rejected_at_capture);
  RecordProperty("rejected_at_verify", rejected_at_verify);
  EXPECT_GT(verified, 0);
  EXPECT_GT(rejected_at_verify, 0) << "no read overlapped a rewrite; the test proved nothing";
  EXPECT_GT(versions_seen.size(), 1u);
}

TEST(Tearing, ARenameOverTheFileDoesNotDisturbTheCapture) {
  TempDir tmp;
  const std::string dir = tmp.Join("ckpt");
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteFileAtomic(dir + "/last.pt", Version(0)).ok());
  auto captured =
      CapturedCheckpoint::Capture(dir, DetectedNow(dir, "last.pt"), tmp.Join("staging"));
  ASSERT_TRUE(captured.ok()) << captured.status().ToString();
  // The safe writers' way: a new file renamed over the old name. The staged
  // link still holds the old inode, unchanged.
  RunWriter("torch_writer.py", {"--dir", dir, "--steps", "1", "--name", "last.pt", "--style",
                                "rename", "--size", std::to_string(kSize)});
  EXPECT_TRUE(captured->Verify().ok());
  auto bytes = ReadFileToString(captured->files()[0].staged_path);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(VersionOf(*bytes), 0);
}

}  // namespace
}  // namespace sg::testing
