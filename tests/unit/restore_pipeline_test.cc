// The restore pipeline (agent/repo/snapshot_file_reader.h): ranges of several
// files on one pool of workers, frames written at their place in any order,
// frame digests checked one by one, and a format 1 file hashed from what was
// written. Manifests are built by hand here so that the layout (frame size,
// gaps between frames, digests) is the test's choice.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

#include "agent/repo/restorer.h"
#include "agent/repo/snapshot_file_reader.h"
#include "agent/repo/store_layout.h"
#include "common/crypto.h"
#include "common/file_store.h"
#include "common/xxh3.h"
#include "common/zstd_codec.h"
#include "tests/support/random_bytes.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

// Passes everything through and counts Gets. A Get of a key holding one of
// `x`, `y` waits (30 s at most) until Gets of both are in flight at once,
// which `overlapped` then says: drives the interleaving instead of timing it.
class GateStore final : public ObjectStore {
 public:
  GateStore(ObjectStore& base, std::string x, std::string y)
      : base_(base), names_{std::move(x), std::move(y)} {}
  bool overlapped() {
    std::lock_guard<std::mutex> lock(mu_);
    return met_;
  }
  int gets() {
    std::lock_guard<std::mutex> lock(mu_);
    return gets_;
  }

  StatusOr<std::string> Get(const std::string& key, std::optional<ByteRange> range,
                            ObjectInfo* info) override {
    int side = -1;
    for (int i = 0; i < 2; ++i) {
      if (key.find(names_[i]) != std::string::npos) side = i;
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++gets_;
      if (side >= 0) {
        ++in_flight_[side];
        if (in_flight_[1 - side] > 0) {
          met_ = true;
          changed_.notify_all();
        }
        changed_.wait_for(lock, std::chrono::seconds(30), [&] { return met_; });
      }
    }
    auto got = base_.Get(key, range, info);
    if (side >= 0) {
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_[side];
    }
    return got;
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
  StatusOr<std::unique_ptr<ObjectWriter>> NewWriter(const std::string& key,
                                                    uint64_t size_hint = 0) override {
    return base_.NewWriter(key, size_hint);
  }
  StatusOr<int> CleanStaleWrites(const std::string& p, std::chrono::seconds age,
                                 const KeyFilter& spare) override {
    return base_.CleanStaleWrites(p, age, spare);
  }
  std::string Describe() const override { return "gate(" + base_.Describe() + ")"; }

 private:
  ObjectStore& base_;
  const std::string names_[2];
  std::mutex mu_;
  std::condition_variable changed_;
  int in_flight_[2] = {0, 0};
  bool met_ = false;
  int gets_ = 0;
};

// A file in memory; `flip_at` (when set) damages the byte written there, as a
// disk that wrote something else would.
class MemorySink final : public FileSink {
 public:
  MemorySink(std::string* out, uint64_t size, std::optional<uint64_t> flip_at,
             std::atomic<size_t>* largest_write)
      : out_(out), flip_at_(flip_at), largest_write_(largest_write) {
    out_->assign(size, '\0');
  }
  Status WriteAt(uint64_t offset, std::string_view raw) override {
    size_t seen = largest_write_->load();
    while (raw.size() > seen && !largest_write_->compare_exchange_weak(seen, raw.size())) {
    }
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
  std::atomic<size_t>* largest_write_;
};

class RestorePipelineTest : public ::testing::Test {
 protected:
  RestorePipelineTest()
      : store_holder_(FileStore::Open(dir_.Join("store")).value()), store_(*store_holder_) {}

  // Stores `raw` as frames of `frame_size` in one object with `gap` bytes
  // between frames (each frame is then its own ranged read), optionally with
  // frame digests (format 2: SHA-256, and XXH3-128 unless `with_xxh3_` is
  // off), and returns its manifest entry.
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
      f.frames.push_back(FrameRef{f.key, object.size(), stored->size(),
                                  digests ? Sha256Hex(slice) : "",
                                  digests && with_xxh3_ ? Xxh3Hex(slice) : ""});
      object += *stored;
      object += std::string(gap, 'g');
    }
    f.stored_size = object.size();
    EXPECT_TRUE(store_.Put(JobPrefix("job") + f.key, object, PutCondition::None()).ok());
    return f;
  }

  // Stores `files` back to back in one pack object, each file its own
  // frames (of `frame_size`, with digests), and returns their entries.
  std::vector<ManifestFile> PutPack(const std::vector<std::pair<std::string, std::string>>& files,
                                    uint64_t frame_size = 4096) {
    std::vector<ManifestFile> out;
    std::string object;
    const std::string key = "objects/pack-1";
    for (const auto& [path, raw] : files) {
      ManifestFile f;
      f.path = path;
      f.size = raw.size();
      f.sha256 = Sha256Hex(raw);
      f.key = key;
      f.codec = Codec::kZstd;
      f.frame_size = frame_size;
      for (uint64_t at = 0; at < raw.size(); at += frame_size) {
        const std::string_view slice = std::string_view(raw).substr(at, frame_size);
        auto stored = EncodeFrame(f.codec, slice, 1);
        EXPECT_TRUE(stored.ok());
        f.frames.push_back(
            FrameRef{key, object.size(), stored->size(), Sha256Hex(slice), Xxh3Hex(slice)});
        f.stored_size += stored->size();
        object += *stored;
      }
      out.push_back(std::move(f));
    }
    EXPECT_TRUE(store_.Put(JobPrefix("job") + key, object, PutCondition::None()).ok());
    return out;
  }

  Status ReadInto(ObjectStore& store, const Manifest& m, std::map<std::string, std::string>* got,
                  std::optional<uint64_t> flip_at = {}) {
    std::mutex mu;
    SnapshotFileReader reader(store, "job", 4);
    return reader.Read(m, [&](const ManifestFile& f) -> StatusOr<std::unique_ptr<FileSink>> {
      std::lock_guard<std::mutex> lock(mu);
      return std::unique_ptr<FileSink>(
          new MemorySink(&(*got)[f.path], f.size, flip_at, &largest_write_));
    });
  }

  TempDir dir_;
  std::unique_ptr<FileStore> store_holder_;
  ObjectStore& store_;
  bool with_xxh3_ = true;
  std::atomic<size_t> largest_write_{0};
};

// Two files of two 8 MiB-bounded ranges each: ranges of both are fetched at
// once. Restoring one large file at a time (the previous pipeline) never had
// a read of "b" in flight with one of "a", and waited out the gate.
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
  EXPECT_TRUE(gate.overlapped()) << "ranges of a.bin and b.bin were never fetched at once";
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
             Put("small", small, 8192, Codec::kZstd, true),
             Put("empty", "", 8192, Codec::kZstd, true)};
  std::map<std::string, std::string> got;
  ASSERT_TRUE(ReadInto(store_, m, &got).ok());
  EXPECT_EQ(got["big"], big);
  EXPECT_EQ(got["small"], small);
  EXPECT_EQ(got["empty"], "");
  EXPECT_TRUE(SnapshotFileReader(store_, "job").Verify(m).ok());
}

// Small files packed back to back in one object are fetched with one ranged
// read, not one per file (the previous pipeline made a request per file).
TEST_F(RestorePipelineTest, PackedSmallFilesCostOneRequest) {
  std::vector<std::pair<std::string, std::string>> files;
  for (int i = 0; i < 40; ++i) {
    files.emplace_back("shard-" + std::to_string(i), RandomBytes(100 + 300 * i, 10 + i));
  }
  Manifest m;
  m.job = "job";
  m.seq = 1;
  m.files = PutPack(files);
  GateStore counting(store_, "\x01", "\x02");
  std::map<std::string, std::string> got;
  ASSERT_TRUE(ReadInto(counting, m, &got).ok());
  EXPECT_EQ(counting.gets(), 1);
  for (const auto& [path, raw] : files) EXPECT_EQ(got[path], raw) << path;
}

// A damaged pack names the file whose bytes are bad, and only that one:
// the other files of the pack still check.
TEST_F(RestorePipelineTest, ADamagedPackNamesTheBadFile) {
  Manifest m;
  m.job = "job";
  m.seq = 1;
  m.files = PutPack(
      {{"a", RandomBytes(5000, 1)}, {"b", RandomBytes(5000, 2)}, {"c", RandomBytes(5000, 3)}});
  const std::string key = JobPrefix("job") + "objects/pack-1";
  std::string object = *store_.Get(key, std::nullopt, nullptr);
  object[m.files[1].frames[0].offset + 100] ^= 0x01;  // inside b
  ASSERT_TRUE(store_.Put(key, object, PutCondition::None()).ok());
  Status verify = SnapshotFileReader(store_, "job").Verify(m);
  ASSERT_TRUE(verify.Is(StatusCode::kCorruption)) << verify.ToString();
  EXPECT_NE(verify.message().find("\"b\""), std::string::npos) << verify.message();
  EXPECT_EQ(verify.message().find("\"a\""), std::string::npos) << verify.message();
  EXPECT_EQ(verify.message().find("\"c\""), std::string::npos) << verify.message();
  std::map<std::string, std::string> got;
  Status read = ReadInto(store_, m, &got);
  EXPECT_TRUE(IsDamage(read)) << read.ToString();
  EXPECT_NE(read.message().find("\"b\""), std::string::npos) << read.message();
}

// A frame larger than a write piece is decoded, checked and written a
// piece at a time, and every codec's pieces land at their places: frames of
// 300 KiB + 6 bytes (not a multiple of any width, so each frame has a tail
// that is not un-shuffled) with gaps between them.
TEST_F(RestorePipelineTest, FramesAreWrittenInPiecesThatMakeTheWholeFile) {
  const uint64_t frame = (300 << 10) + 6;
  Manifest m;
  m.job = "job";
  m.seq = 1;
  std::map<std::string, std::string> want;
  int n = 0;
  for (Codec codec : {Codec::kNone, Codec::kZstd, Codec::kZstdShuffle2, Codec::kZstdShuffle4}) {
    const std::string path = "f" + std::to_string(n);
    want[path] = RandomBytes(3 * frame + 1001, 40 + n++);
    m.files.push_back(Put(path, want[path], frame, codec, true, /*gap=*/3));
  }
  std::map<std::string, std::string> got;
  ASSERT_TRUE(ReadInto(store_, m, &got).ok());
  for (const auto& [path, raw] : want) EXPECT_EQ(got[path], raw) << path;
  EXPECT_LE(largest_write_.load(), 64u << 10) << "frames are written in 64 KiB pieces, not whole";
  EXPECT_GT(largest_write_.load(), 0u);
}

// Restore checks each frame against its XXH3-128 when the manifest gives it
// (and does not spend a SHA-256 on it); verify checks both digests. A frame
// whose XXH3-128 does not match fails the restore, naming file and frame.
TEST_F(RestorePipelineTest, RestoreChecksTheXxh3AndVerifyChecksBothDigests) {
  const std::string raw = RandomBytes(20 * 1024, 7);
  Manifest m;
  m.job = "job";
  m.seq = 1;
  m.files = {Put("x.bin", raw, 4096, Codec::kZstdShuffle4, true)};
  const FrameRef good = m.files[0].frames[1];

  m.files[0].frames[1].sha256 = Sha256Hex("something else");
  std::map<std::string, std::string> got;
  ASSERT_TRUE(ReadInto(store_, m, &got).ok());
  EXPECT_EQ(got["x.bin"], raw);
  Status verify = SnapshotFileReader(store_, "job").Verify(m);
  EXPECT_TRUE(verify.Is(StatusCode::kCorruption)) << verify.ToString();
  EXPECT_NE(verify.message().find("frame 1"), std::string::npos) << verify.message();
  EXPECT_NE(verify.message().find("SHA-256 does not match"), std::string::npos) << verify.message();

  m.files[0].frames[1] = good;
  m.files[0].frames[1].xxh3 = Xxh3Hex("something else");
  Status read = ReadInto(store_, m, &got);
  EXPECT_TRUE(read.Is(StatusCode::kCorruption)) << read.ToString();
  EXPECT_NE(read.message().find("\"x.bin\""), std::string::npos) << read.message();
  EXPECT_NE(read.message().find("frame 1"), std::string::npos) << read.message();
  EXPECT_NE(read.message().find("XXH3-128 does not match"), std::string::npos) << read.message();
}

// Without XXH3-128 (a format 2 manifest from before it), each frame is
// checked against its SHA-256.
TEST_F(RestorePipelineTest, WithoutXxh3EachFrameIsCheckedBySha256) {
  with_xxh3_ = false;
  const std::string raw = RandomBytes(20 * 1024, 8);
  Manifest m;
  m.job = "job";
  m.seq = 1;
  m.files = {Put("y.bin", raw, 4096, Codec::kZstd, true)};
  std::map<std::string, std::string> got;
  ASSERT_TRUE(ReadInto(store_, m, &got).ok());
  EXPECT_EQ(got["y.bin"], raw);
  m.files[0].frames[3].sha256 = Sha256Hex("something else");
  Status read = ReadInto(store_, m, &got);
  EXPECT_TRUE(read.Is(StatusCode::kCorruption)) << read.ToString();
  EXPECT_NE(read.message().find("frame 3"), std::string::npos) << read.message();
  EXPECT_NE(read.message().find("SHA-256 does not match"), std::string::npos) << read.message();
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
