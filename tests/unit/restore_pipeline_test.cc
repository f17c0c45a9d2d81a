// The restore pipeline (agent/snapshot_file_reader.h): ranges of several
// files on one pool of workers, frames written at their place in any order,
// frame digests checked one by one, and a format 1 file hashed from what was
// written. Manifests are built by hand here so that the layout (frame size,
// gaps between frames, digests) is the test's choice.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

#include "agent/restorer.h"
#include "agent/snapshot_file_reader.h"
#include "agent/store_layout.h"
#include "common/crypto.h"
#include "common/file_store.h"
#include "common/zstd_codec.h"
#include "tests/support/random_bytes.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

// Passes everything through; a Get of a key holding `hold` waits until a
// Get of a key holding `until` has started (or 30 s, then `overlapped`
// stays false). Drives the interleaving instead of timing it.
class GateStore final : public ObjectStore {
 public:
  GateStore(ObjectStore& base, std::string hold, std::string until)
      : base_(base), hold_(std::move(hold)), until_(std::move(until)) {}
  bool overlapped() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_until_ && held_;
  }

  StatusOr<std::string> Get(const std::string& key, std::optional<ByteRange> range,
                            ObjectInfo* info) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (key.find(until_) != std::string::npos) {
      seen_until_ = true;
      changed_.notify_all();
    } else if (key.find(hold_) != std::string::npos && !seen_until_) {
      held_ = changed_.wait_for(lock, std::chrono::seconds(30), [&] { return seen_until_; });
    }
    lock.unlock();
    return base_.Get(key, range, info);
  }
  StatusOr<std::string> Put(const std::string& key, std::string_view data,
                            const PutCondition& c) override {
    return base_.Put(key, data, c);
  }
  StatusOr<ObjectInfo> Head(const std::string& key) override { return base_.Head(key); }
  StatusOr<ListPage> List(const std::string& p, const std::string& t, int n) override {
    return base_.List(p, t, n);
  }
  Status Delete(const std::string& key) override { return base_.Delete(key); }
  StatusOr<std::unique_ptr<ObjectWriter>> NewWriter(const std::string& key) override {
    return base_.NewWriter(key);
  }
  StatusOr<int> CleanStaleWrites(const std::string& p, std::chrono::seconds age) override {
    return base_.CleanStaleWrites(p, age);
  }
  std::string Describe() const override { return "gate(" + base_.Describe() + ")"; }

 private:
  ObjectStore& base_;
  const std::string hold_, until_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool seen_until_ = false;
  bool held_ = false;
};

// A file in memory; `flip_at` (when set) damages the byte written there, as a
// disk that wrote something else would.
class MemorySink final : public FileSink {
 public:
  MemorySink(std::string* out, uint64_t size, std::optional<uint64_t> flip_at)
      : out_(out), flip_at_(flip_at) {
    out_->assign(size, '\0');
  }
  Status WriteAt(uint64_t offset, std::string_view raw) override {
    std::memcpy(out_->data() + offset, raw.data(), raw.size());
    if (flip_at_ && *flip_at_ >= offset && *flip_at_ < offset + raw.size()) {
      (*out_)[*flip_at_] ^= 1;
    }
    return Status::Ok();
  }
  Status ReadAt(uint64_t offset, uint64_t length, std::string* out) override {
    out->assign(*out_, offset, length);
    return Status::Ok();
  }
  Status Finish() override { return Status::Ok(); }

 private:
  std::string* out_;
  std::optional<uint64_t> flip_at_;
};

class RestorePipelineTest : public ::testing::Test {
 protected:
  RestorePipelineTest()
      : store_holder_(FileStore::Open(dir_.Join("store")).value()), store_(*store_holder_) {}

  // Stores `raw` as frames of `frame_size` in one object with `gap` bytes
  // between frames (each frame is then its own ranged read), optionally with
  // frame digests (format 2), and returns its manifest entry.
  ManifestFile Put(const std::string& path, const std::string& raw, uint64_t frame_size,
                   Codec codec, bool digests, uint64_t gap = 0) {
    ManifestFile f;
    f.path = path;
    f.size = raw.size();
    f.sha256 = Sha256Hex(raw);
    f.key = "objects/" + path;
    f.codec = codec;
    f.frame_size = frame_size;
    std::string object;
    for (uint64_t at = 0; at < raw.size(); at += frame_size) {
      const std::string_view slice = std::string_view(raw).substr(at, frame_size);
      auto stored = EncodeFrame(codec, slice, 1);
      EXPECT_TRUE(stored.ok());
      f.frames.push_back(
          FrameRef{f.key, object.size(), stored->size(), digests ? Sha256Hex(slice) : ""});
      object += *stored;
      object += std::string(gap, 'g');
    }
    f.stored_size = object.size();
    EXPECT_TRUE(store_.Put(JobPrefix("job") + f.key, object, PutCondition::None()).ok());
    return f;
  }

  Status ReadInto(ObjectStore& store, const Manifest& m, std::map<std::string, std::string>* got,
                  std::optional<uint64_t> flip_at = {}) {
    std::mutex mu;
    SnapshotFileReader reader(store, "job", 4);
    return reader.Read(m, [&](const ManifestFile& f) -> StatusOr<std::unique_ptr<FileSink>> {
      std::lock_guard<std::mutex> lock(mu);
      return std::unique_ptr<FileSink>(new MemorySink(&(*got)[f.path], f.size, flip_at));
    });
  }

  TempDir dir_;
  std::unique_ptr<FileStore> store_holder_;
  ObjectStore& store_;
};

// Two files of two 8 MiB-bounded ranges each: the second file's first range
// is fetched while the first file's is held. Restoring one large file at a
// time (the previous pipeline) never fetched "b" before "a" was done.
TEST_F(RestorePipelineTest, SeveralLargeFilesAreFetchedAtOnce) {
  const std::string a = RandomBytes(9 << 20, 1), b = RandomBytes(9 << 20, 2);
  Manifest m;
  m.job = "job";
  m.seq = 1;
  m.files = {Put("a.bin", a, 1 << 20, Codec::kNone, false),
             Put("b.bin", b, 1 << 20, Codec::kNone, false)};
  GateStore gate(store_, "a.bin", "b.bin");
  std::map<std::string, std::string> got;
  ASSERT_TRUE(ReadInto(gate, m, &got).ok());
  EXPECT_TRUE(gate.overlapped()) << "a range of b.bin was fetched while one of a.bin waited";
  EXPECT_EQ(got["a.bin"], a);
  EXPECT_EQ(got["b.bin"], b);
}

// Frames written out of order (the last frame's range is fetched before the
// first one's returns) still make the whole file, and its format 1 hash,
// which is taken in order from what was written.
TEST_F(RestorePipelineTest, FramesWrittenOutOfOrderMakeTheWholeFile) {
  const std::string raw = RandomBytes(64 * 1024 + 17, 3);
  Manifest m;
  m.job = "job";
  m.seq = 1;
  m.files = {Put("x.bin", raw, 4096, Codec::kZstd, false, /*gap=*/1)};
  std::map<std::string, std::string> got;
  ASSERT_TRUE(ReadInto(store_, m, &got).ok());
  EXPECT_EQ(got["x.bin"], raw);
}

// Every byte that reaches the file is checked: a format 1 file is hashed
// from what was written, so a write that went wrong is caught. (Hashing the
// decoded bytes, as before, passed this file.)
TEST_F(RestorePipelineTest, AFormatOneFileIsHashedFromWhatWasWritten) {
  const std::string raw = RandomBytes(40 * 1024, 4);
  Manifest m;
  m.job = "job";
  m.seq = 1;
  m.files = {Put("w.bin", raw, 4096, Codec::kZstd, false, /*gap=*/1)};
  std::map<std::string, std::string> got;
  Status st = ReadInto(store_, m, &got, /*flip_at=*/20000);
  EXPECT_TRUE(st.Is(StatusCode::kCorruption)) << st.ToString();
  EXPECT_NE(st.message().find("\"w.bin\""), std::string::npos) << st.message();
}

// With frame digests (format 2) each frame is checked by itself, in the
// worker that decoded it: a stored frame changed together with the
// whole-file SHA-256 (so size, codec and file hash all agree) is still
// caught, and the error names the file and the frame.
TEST_F(RestorePipelineTest, EachFrameIsCheckedAgainstItsOwnDigest) {
  std::string raw = RandomBytes(16 * 1024, 5);
  Manifest m;
  m.job = "job";
  m.seq = 1;
  m.files = {Put("f.bin", raw, 4096, Codec::kNone, true)};
  // Damage frame 2 in the store, and make the whole-file hash fit the damage.
  const std::string key = JobPrefix("job") + m.files[0].key;
  std::string object = *store_.Get(key, std::nullopt, nullptr);
  object[2 * 4096 + 10] ^= 0x40;
  ASSERT_TRUE(store_.Put(key, object, PutCondition::None()).ok());
  raw[2 * 4096 + 10] ^= 0x40;
  m.files[0].sha256 = Sha256Hex(raw);

  std::map<std::string, std::string> got;
  Status st = ReadInto(store_, m, &got);
  EXPECT_TRUE(st.Is(StatusCode::kCorruption)) << st.ToString();
  EXPECT_NE(st.message().find("\"f.bin\""), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("frame 2"), std::string::npos) << st.message();

  Status verify = SnapshotFileReader(store_, "job").Verify(m);
  EXPECT_TRUE(verify.Is(StatusCode::kCorruption)) << verify.ToString();
  EXPECT_NE(verify.message().find("frame 2"), std::string::npos) << verify.message();
}

// Frame digests also carry a good file through, in any order, without the
// whole-file pass; an empty file and a one-range file go along.
TEST_F(RestorePipelineTest, FilesWithFrameDigestsRoundTrip) {
  const std::string big = RandomBytes(100 * 1024 + 3, 6), small = "tiny";
  Manifest m;
  m.job = "job";
  m.seq = 1;
  m.files = {Put("big", big, 8192, Codec::kZstdShuffle4, true, 1),
             Put("small", small, 8192, Codec::kZstd, true), Put("empty", "", 8192, Codec::kZstd, true)};
  std::map<std::string, std::string> got;
  ASSERT_TRUE(ReadInto(store_, m, &got).ok());
  EXPECT_EQ(got["big"], big);
  EXPECT_EQ(got["small"], small);
  EXPECT_EQ(got["empty"], "");
  EXPECT_TRUE(SnapshotFileReader(store_, "job").Verify(m).ok());
}

// Ranges grow with the file: fewer requests for large objects, and never
// more than the stored bound per request.
TEST(ReadRangeBytes, LargerRangesForLargeFiles) {
  ManifestFile small, large;
  small.stored_size = 10 << 20;
  large.stored_size = 1ull << 30;
  EXPECT_EQ(ReadRangeBytes(small), 8u << 20);
  EXPECT_GT(ReadRangeBytes(large), ReadRangeBytes(small));
  large.frame_size = 8 << 20;
  large.size = 64ull << 20;
  for (int i = 0; i < 8; ++i) large.AppendOwnFrame(5 << 20);
  for (const ReadRange& r : PlanReadRanges(large, ReadRangeBytes(large), 1ull << 30)) {
    EXPECT_LE(r.stored, ReadRangeBytes(large));
  }
}

}  // namespace
}  // namespace sg::testing
