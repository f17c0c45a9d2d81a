// Frame reuse (docs/design.md §4, "Frame reuse" and "Retention with shared
// objects"): a frame already stored for the job is referenced, not uploaded;
// snapshots made of references restore, verify and fall back like any other;
// retention keeps every object a kept snapshot references, also against a
// writer running between gc's steps.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <filesystem>
#include <thread>

#include "agent/repo/frame_index.h"
#include "agent/repo/restorer.h"
#include "agent/repo/retention.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/snapshot_file_reader.h"
#include "agent/repo/store_layout.h"
#include "common/files.h"
#include "common/xxh3.h"
#include "tests/support/faulty_store.h"
#include "tests/support/file_store_fixture.h"
#include "tests/support/random_bytes.h"
#include "tests/support/reuse_support.h"

namespace sg::testing {
namespace {

constexpr uint64_t kF = kFrameSize;

class FrameReuseTest : public FileStoreTest {
 protected:
  StatusOr<SnapshotResult> Commit(const Tree& tree, ObjectStore* store = nullptr,
                                  bool reuse = true) {
    const std::string src = dir_.Join("src-" + std::to_string(++sources_));
    WriteTree(src, tree);
    SnapshotRequest req;
    req.job = "job";
    req.instance = "i-test";
    SG_ASSIGN_OR_RETURN(CapturedCheckpoint capture, CaptureTree(src, std::nullopt));
    SnapshotOptions options;
    options.reuse = reuse;
    SnapshotWriter writer(store ? *store : *store_, clock_, options);
    return writer.Write(capture, req);
  }
  Manifest Read(uint64_t seq) {
    auto m = SnapshotCatalog(*store_, "job").ReadManifest(seq);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : Manifest{};
  }
  StatusOr<RestoreResult> Restore(const std::string& to, std::optional<uint64_t> seq = {}) {
    Restorer restorer(*store_, RestoreOptions{});
    return restorer.Restore("job", dir_.Join(to), seq);
  }
  bool Exists(const std::string& key) {
    return std::filesystem::exists(dir_.Join("store/job/" + key));
  }

  // A LoRA-style checkpoint: a frozen base of three frames, a small adapter.
  const std::string base_ = RandomBytes(3 * kF - 1000, 11);
  Tree Lora(int step) {
    return {{"base.bin", {base_, 0644}}, {"adapter.bin", {RandomBytes(100000, 100 + step), 0644}}};
  }
};

// The writer reads the history while its first frames are compressed: a
// lookup waits for the index, and one that could not be read finds nothing.
TEST(FrameIndexTest, APendingIndexAnswersOnlyOnceReady) {
  const FrameRef ref{"snapshots/0000000001/files/a", 0, 10, std::string(64, 'a'), {}};
  FrameIndex index(/*pending=*/true);
  EXPECT_FALSE(index.ready());
  std::atomic<bool> found{false};
  std::thread finder([&] { found = index.Find(Codec::kZstd, ref.sha256).has_value(); });
  index.Add(Codec::kZstd, ref);  // the history, read while the finder waits
  index.MarkReady(true);
  finder.join();
  EXPECT_TRUE(found) << "the lookup waited for the history";
  EXPECT_TRUE(index.ready());
  FrameIndex unreadable(/*pending=*/true);
  unreadable.Add(Codec::kZstd, ref);
  unreadable.MarkReady(false);
  EXPECT_FALSE(unreadable.Find(Codec::kZstd, ref.sha256).has_value());
  EXPECT_TRUE(FrameIndex().Find(Codec::kZstd, "none") == std::nullopt) << "ready by default";
}

TEST_F(FrameReuseTest, AnUnchangedFileIsReferencedNotUploaded) {
  auto first = Commit(Lora(1));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->reused_bytes, 0u);
  auto second = Commit(Lora(2));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  const Manifest m = Read(second->seq);
  const ManifestFile& base = m.files[1];
  ASSERT_EQ(base.path, "base.bin");
  ASSERT_EQ(base.frames.size(), 3u);
  for (const FrameRef& r : base.frames) {
    EXPECT_EQ(r.key, "snapshots/0000000001/files/base.bin") << "codec none: random bytes";
  }
  EXPECT_FALSE(Exists(base.key)) << "a file of references only has no object of its own";
  EXPECT_EQ(second->reused_bytes, base.stored_size);
  EXPECT_EQ(second->new_bytes, m.files[0].stored_size);
  EXPECT_LE(second->new_bytes * 20, second->stored_bytes) << "the adapter only: under 5%";
  EXPECT_EQ(m.NewStored(), second->new_bytes);

  auto restored = Restore("out");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->seq, 2u);
  EXPECT_TRUE(restored->rejected.empty());
  EXPECT_EQ(ReadTree(dir_.Join("out")), Lora(2));
  EXPECT_TRUE(SnapshotFileReader(*store_, "job").Verify(m).ok());
}

// A frame reused from a snapshot written before frames carried XXH3-128
// gains it in the new manifest (its SHA-256 matched, so the writer has its
// bytes), so restore checks it the fast way; the old manifest is untouched.
TEST_F(FrameReuseTest, AFrameReusedFromBeforeXxh3GainsIt) {
  auto first = Commit(Lora(1));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string path = dir_.Join("store/job/snapshots/0000000001/manifest.json");
  nlohmann::json j = nlohmann::json::parse(*ReadFileToString(path));
  for (auto& f : j["files"]) {
    for (auto& frame : f["frames"]) frame.erase("xxh3");
  }
  ASSERT_TRUE(WriteFileAtomic(path, j.dump(1)).ok());
  ASSERT_TRUE(Read(first->seq).files[1].frames[0].xxh3.empty());
  auto second = Commit(Lora(2));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  const ManifestFile base = Read(second->seq).files[1];
  ASSERT_EQ(base.path, "base.bin");
  for (size_t i = 0; i < base.frames.size(); ++i) {
    EXPECT_EQ(base.frames[i].key, "snapshots/0000000001/files/base.bin") << "reused";
    EXPECT_EQ(base.frames[i].xxh3, Xxh3Hex(std::string_view(base_).substr(i * kF, kF))) << i;
  }
  EXPECT_TRUE(Read(first->seq).files[1].frames[0].xxh3.empty());
  auto restored = Restore("out");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(ReadTree(dir_.Join("out")), Lora(2));
}

TEST_F(FrameReuseTest, ReuseWorksAcrossFilesAndWithinAFile) {
  const std::string frame = std::string(kF / 2, 'z') + RandomBytes(kF / 2, 12);
  const Tree tree = {{"a", {frame + frame + frame, 0644}},  // one frame, three times
                     {"copy/a", {frame + frame + frame, 0644}}};
  auto r = Commit(tree);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Manifest m = Read(r->seq);
  const ManifestFile& a = m.files[0];
  const ManifestFile& copy = m.files[1];
  ASSERT_EQ(a.path, "a");
  // Each of the two files is hashed and compressed in parallel, so a later
  // frame may be encoded before the first is indexed: the guarantee is that
  // everything after the first file is referenced.
  EXPECT_LE(r->new_bytes, a.stored_size);
  EXPECT_EQ(r->new_bytes + r->reused_bytes, r->stored_bytes);
  for (const FrameRef& ref : copy.frames) EXPECT_EQ(ref.key, a.key);
  EXPECT_TRUE(Restore("out").ok());
  EXPECT_EQ(ReadTree(dir_.Join("out")), tree);
}

// Small files go into packs; the unchanged ones (a tokenizer, configs, a
// data-loader state) are referenced where an earlier snapshot packed them,
// and only the changed one is packed again.
TEST_F(FrameReuseTest, UnchangedSmallFilesOfAPackAreReferencedNotPackedAgain) {
  auto tree = [](int step) {
    Tree t;
    for (int i = 0; i < 20; ++i) {
      t["tokenizer/part-" + std::to_string(100 + i) + ".json"] = {
          "{\"part\": " + std::to_string(i) + ", \"vocab\": \"" + RandomBytes(4000, 200 + i) + "\"}",
          0644};
    }
    t["state/loader.json"] = {"{\"step\": " + std::to_string(step) + "}", 0644};
    return t;
  };
  auto first = Commit(tree(1));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const Manifest m1 = Read(first->seq);
  ASSERT_EQ(m1.files.size(), 21u);
  ASSERT_TRUE(m1.files[0].frames[0].key.find("/packs/") != std::string::npos) << "packed";

  auto second = Commit(tree(2));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  const Manifest m2 = Read(second->seq);
  uint64_t loader_stored = 0;
  for (const ManifestFile& f : m2.files) {
    ASSERT_EQ(f.frames.size(), 1u) << f.path;
    const std::string& key = f.frames[0].key;
    if (f.path == "state/loader.json") {
      EXPECT_EQ(key, PackObjectKey(2, 1)) << "the changed file is packed anew";
      loader_stored = f.stored_size;
    } else {
      EXPECT_EQ(key, PackObjectKey(1, 1)) << f.path << " is referenced in snapshot 1's pack";
    }
  }
  EXPECT_EQ(second->new_bytes, loader_stored);
  EXPECT_EQ(second->new_bytes + second->reused_bytes, second->stored_bytes);

  // Nothing changed: no pack object at all.
  auto third = Commit(tree(2));
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(third->new_bytes, 0u);
  EXPECT_FALSE(Exists(PackObjectKey(3, 1)));

  for (uint64_t seq : {1u, 2u, 3u}) {
    auto restored = Restore("out-" + std::to_string(seq), seq);
    ASSERT_TRUE(restored.ok()) << restored.status().ToString();
    EXPECT_EQ(ReadTree(dir_.Join("out-" + std::to_string(seq))), tree(seq == 1 ? 1 : 2));
    EXPECT_TRUE(SnapshotFileReader(*store_, "job").Verify(Read(seq)).ok());
  }
}

// A snapshot of a higher seq committed while this one is written (another
// writer of the job) offers nothing to reuse: a manifest may only reference
// its own seq and lower ones, and readers refuse any other.
TEST_F(FrameReuseTest, ASnapshotCommittedAboveTheWritersOwnSeqIsNeverReferenced) {
  ASSERT_TRUE(Commit(Lora(1)).ok());
  const Tree same = {{"new.bin", {RandomBytes(3 * kF, 55), 0644}}};
  StepStore steps(*store_);
  bool claimed = false, other_wrote = false;
  Status other_status;
  steps.BeforeStep([&](const StepStore::Op& op) {
    if (op.kind == StepStore::Kind::kPut && op.key.ends_with("/claim")) claimed = true;
    // The first listing after the claim (the one the index takes manifests
    // from): another writer commits the same bytes as seq 3 just before it.
    if (op.kind != StepStore::Kind::kList || !claimed || other_wrote) return;
    other_wrote = true;
    auto other = Commit(same);
    other_status = other.ok() ? Status::Ok() : other.status();
  });
  auto mine = Commit(same, &steps);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  ASSERT_TRUE(other_wrote);
  ASSERT_TRUE(other_status.ok()) << other_status.ToString();
  ASSERT_EQ(mine->seq, 2u);
  const Manifest m = Read(2);  // fails to parse if it names seq 3
  ASSERT_EQ(m.files.size(), 1u);
  for (const FrameRef& r : m.files[0].frames) EXPECT_EQ(r.key, m.files[0].key);
  auto restored = Restore("out", 2);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(ReadTree(dir_.Join("out")), same);
}

TEST_F(FrameReuseTest, ReuseOffUploadsEveryFrame) {
  ASSERT_TRUE(Commit(Lora(1)).ok());
  auto off = Commit(Lora(2), nullptr, /*reuse=*/false);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->reused_bytes, 0u);
  const Manifest m = Read(off->seq);
  for (const ManifestFile& f : m.files) {
    for (const FrameRef& r : f.frames) EXPECT_EQ(r.key, f.key);
  }
}

TEST_F(FrameReuseTest, OnlyFramesOfTheSameCodecAreShared) {
  const std::string random = RandomBytes(kF, 13);
  ASSERT_TRUE(Commit({{"raw", {random, 0644}}}).ok());  // codec none
  // The same first frame, then zeros: sampled as compressible, so zstd.
  auto r = Commit({{"mixed", {random + std::string(2 * kF, '\0'), 0644}}});
  ASSERT_TRUE(r.ok());
  const Manifest m = Read(r->seq);
  ASSERT_NE(m.files[0].codec, Codec::kNone);
  EXPECT_EQ(m.files[0].frames[0].key, m.files[0].key) << "a codec-none frame is not reused";
  EXPECT_TRUE(Restore("out").ok());
}

TEST_F(FrameReuseTest, RetentionKeepsReferencedObjectsAndDropsTheRest) {
  for (int step = 1; step <= 3; ++step) ASSERT_TRUE(Commit(Lora(step)).ok());
  auto gc = CollectGarbage(*store_, clock_, "job", GcOptions{1, std::chrono::hours(1)});
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->deleted, (std::vector<uint64_t>{2, 1}));
  EXPECT_EQ(*SnapshotCatalog(*store_, "job").Committed(), std::vector<uint64_t>{3});
  EXPECT_TRUE(Exists("snapshots/0000000001/files/base.bin")) << "snapshot 3 references it";
  EXPECT_FALSE(Exists("snapshots/0000000001/manifest.json"));
  EXPECT_FALSE(Exists("snapshots/0000000001/claim"));
  EXPECT_FALSE(Exists("snapshots/0000000001/files/adapter.bin"));
  EXPECT_FALSE(Exists("snapshots/0000000002"));
  EXPECT_EQ(CountMissingReferences(*store_, "job"), 0);

  // A snapshot taken now still finds the base through snapshot 3's manifest.
  auto fourth = Commit(Lora(4));
  ASSERT_TRUE(fourth.ok());
  EXPECT_EQ(Read(4).files[1].frames[0].key, "snapshots/0000000001/files/base.bin");
  ASSERT_TRUE(CollectGarbage(*store_, clock_, "job", GcOptions{1, std::chrono::hours(1)}).ok());
  EXPECT_TRUE(Exists("snapshots/0000000001/files/base.bin"));
  auto restored = Restore("out");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(ReadTree(dir_.Join("out")), Lora(4));

  // A new base: nothing references the old one any more, and it goes.
  ASSERT_TRUE(Commit({{"base.bin", {RandomBytes(kF, 14), 0644}}}).ok());
  ASSERT_TRUE(CollectGarbage(*store_, clock_, "job", GcOptions{1, std::chrono::hours(1)}).ok());
  EXPECT_FALSE(Exists("snapshots/0000000001"));
  EXPECT_EQ(CountMissingReferences(*store_, "job"), 0);
}

// gc runs while a writer is between its index and its commit (the writer's
// first upload runs gc to the end): the live claim holds back every deletion.
TEST_F(FrameReuseTest, GcDuringAWriteDeletesNoObjectTheWriterMayReference) {
  for (int step = 1; step <= 2; ++step) ASSERT_TRUE(Commit(Lora(step)).ok());
  FaultyStore faulty(*store_);
  Status gc_status;
  faulty.OnFirstAppend("adapter.bin", [&] {
    gc_status =
        CollectGarbage(*store_, clock_, "job", GcOptions{1, std::chrono::hours(1)}).status();
  });
  auto third = Commit(Lora(3), &faulty);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  ASSERT_TRUE(gc_status.ok()) << gc_status.ToString();
  EXPECT_EQ(CountMissingReferences(*store_, "job"), 0);
  EXPECT_TRUE(Restore("out").ok());
  EXPECT_EQ(ReadTree(dir_.Join("out")), Lora(3));
}

// gc is stopped after it uncommitted snapshot 1 (the first List after its
// deletes); a writer claims, indexes, uploads and commits in that gap. The
// writer cannot have seen snapshot 1, and gc's second listing sees its manifest.
TEST_F(FrameReuseTest, AWriterBetweenGcsStepsIsSeenByItsSecondListing) {
  for (int step = 1; step <= 2; ++step) ASSERT_TRUE(Commit(Lora(step)).ok());
  StepStore gc_store(*store_);
  gc_store.BeforeStep([&](const StepStore::Op& op) {
    if (op.kind == StepStore::Kind::kList && gc_store.deletes() > 0 && !gc_store.hooked()) {
      gc_store.set_hooked();
      auto w = Commit(Lora(3));
      EXPECT_TRUE(w.ok()) << w.status().ToString();
    }
  });
  auto gc = CollectGarbage(gc_store, clock_, "job", GcOptions{1, std::chrono::hours(1)});
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  ASSERT_TRUE(gc_store.hooked());
  EXPECT_EQ(CountMissingReferences(*store_, "job"), 0);
  auto restored = Restore("out");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->seq, 3u);
  EXPECT_EQ(ReadTree(dir_.Join("out")), Lora(3));
}

// The writer reads the history from before its claim, and gc retires
// snapshot 1 (deleting its objects) after that read but before the claim.
// The index takes only what a listing after the claim shows, so the new
// snapshot uploads the base again instead of referencing deleted objects.
TEST_F(FrameReuseTest, AHistoryReadBeforeTheClaimCountsOnlyWhatAListingAfterItShows) {
  ASSERT_TRUE(Commit(Lora(1)).ok());                                    // 1: the base
  ASSERT_TRUE(Commit({{"other.bin", {RandomBytes(kF, 7), 0644}}}).ok());  // 2: no base
  StepStore steps(*store_);
  std::mutex mu;
  std::condition_variable cv;
  bool read_one = false;
  std::atomic<bool> gc_ran{false};
  Status gc_status;
  const std::string manifest_one = ManifestKey("job", 1);
  steps.AfterGet([&](const std::string& key) {
    if (key != manifest_one) return;
    std::lock_guard<std::mutex> lock(mu);
    read_one = true;
    cv.notify_all();
  });
  steps.BeforeStep([&](const StepStore::Op& op) {
    if (op.kind != StepStore::Kind::kPut || !op.key.ends_with("/claim") || gc_ran) return;
    {
      // Until the writer's early read has snapshot 1's manifest (a bound
      // only a machine stalled for half a minute reaches).
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::seconds(30), [&] { return read_one; });
    }
    gc_ran = true;
    gc_status = CollectGarbage(*store_, clock_, "job", GcOptions{1, std::chrono::hours(1)}).status();
  });
  auto third = Commit(Lora(3), &steps);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  ASSERT_TRUE(gc_ran);
  ASSERT_TRUE(read_one) << "the history was read before the claim";
  ASSERT_TRUE(gc_status.ok()) << gc_status.ToString();
  EXPECT_FALSE(Exists("snapshots/" + SeqName(1) + "/files/base.bin.zst")) << "gc deleted it";
  EXPECT_EQ(CountMissingReferences(*store_, "job"), 0);
  auto restored = Restore("out");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(ReadTree(dir_.Join("out")), Lora(3));
}

// A damaged shared object: every snapshot that needs it is refused with the
// object named, restore falls back to one that does not need it, and
// `verify` checks every referenced frame.
TEST_F(FrameReuseTest, ADamagedSharedObjectIsNamedAndEverySnapshotNeedingItFallsBack) {
  const std::string other_base = std::string(2 * kF, 'b');       // zstd: damage is seen at decode
  ASSERT_TRUE(Commit({{"base.bin", {other_base, 0644}}}).ok());  // 1: needs nothing shared
  const std::string zbase = std::string(3 * kF, 'q');
  ASSERT_TRUE(Commit({{"base.bin", {zbase, 0644}}, {"a", {"1", 0644}}}).ok());  // 2: stores it
  ASSERT_TRUE(Commit({{"base.bin", {zbase, 0644}}, {"a", {"2", 0644}}}).ok());  // 3: references
  ASSERT_TRUE(Commit({{"base.bin", {zbase, 0644}}, {"a", {"3", 0644}}}).ok());  // 4: references
  const std::string shared = "snapshots/0000000002/files/base.bin.zst";
  EXPECT_EQ(Read(4).files[1].frames[0].key, shared);
  const std::string path = dir_.Join("store/job/" + shared);
  std::string bytes = *ReadFileToString(path);
  // Inside the first frame (the one snapshots 3 and 4 reference: within a
  // file, later copies may or may not have been stored again).
  const FrameRef first = Read(2).files[1].frames[0];
  ASSERT_EQ(first.key, shared);
  bytes[first.offset + first.stored - 5] ^= 0x40;
  ASSERT_TRUE(WriteFileAtomic(path, bytes).ok());

  for (uint64_t seq : {2, 3, 4}) {
    Status st = SnapshotFileReader(*store_, "job").Verify(Read(seq));
    EXPECT_FALSE(st.ok()) << seq;
    EXPECT_NE(st.message().find(shared), std::string::npos) << st.message();
  }
  EXPECT_TRUE(SnapshotFileReader(*store_, "job").Verify(Read(1)).ok());
  auto r = Restore("out");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, 1u);
  ASSERT_EQ(r->rejected.size(), 3u);
  for (const std::string& why : r->rejected) {
    EXPECT_NE(why.find(shared), std::string::npos) << why;
  }
  EXPECT_EQ(ReadTree(dir_.Join("out")), (Tree{{"base.bin", {other_base, 0644}}}));
}

}  // namespace
}  // namespace sg::testing

namespace sg::testing {
namespace {

// The history's manifests are read several at a time (Prefetch), and once:
// the writer's index, restore's history and retention wait for their GETs.
TEST_F(FrameReuseTest, TheHistorysManifestsAreReadTogetherAndOnce) {
  for (int step = 0; step < 3; ++step) ASSERT_TRUE(Commit(Lora(step)).ok());
  StepStore steps(*store_);
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0, most = 0, manifest_gets = 0;
  steps.BeforeStep([&](const StepStore::Op& op) {
    if (op.kind != StepStore::Kind::kGet || !op.key.ends_with("manifest.json")) return;
    std::unique_lock<std::mutex> lock(mu);
    ++manifest_gets;
    most = std::max(most, ++in_flight);
    cv.notify_all();
    // Held until a second GET is in flight (or, read one at a time, a bound
    // that only a machine stalled for half a minute reaches).
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return most >= 2; });
    --in_flight;
  });
  SnapshotCatalog catalog(steps, "job");
  auto history = catalog.History();
  ASSERT_TRUE(history.ok()) << history.status().ToString();
  ASSERT_EQ(history->entries.size(), 3u);
  for (const auto& e : history->entries) EXPECT_TRUE(e.manifest.ok());
  EXPECT_GE(most, 2) << "two manifest GETs at once";
  EXPECT_EQ(manifest_gets, 3) << "each manifest read once";
  for (const auto& e : history->entries) ASSERT_TRUE(catalog.ReadManifest(e.seq).ok());
  EXPECT_EQ(manifest_gets, 3) << "ReadManifest answers from what was read";
}

}  // namespace
}  // namespace sg::testing
