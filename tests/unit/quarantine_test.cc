// Quarantine of damaged objects (docs/design.md §4, "Quarantine"), on an
// in-memory store: a damaged shared object is quarantined by the read that
// finds it; the next snapshot stores its frames afresh; retention never
// counts a snapshot that needs it as a good one; restore and `run`'s start
// pass over every such snapshot.
#include "agent/repo/quarantine.h"

#include <gtest/gtest.h>

#include <atomic>

#include "agent/ledger/events.h"
#include "agent/repo/restorer.h"
#include "agent/repo/retention.h"
#include "agent/repo/snapshot_file_reader.h"
#include "agent/repo/store_layout.h"
#include "agent/run/job_start.h"
#include "tests/support/capture_in_place.h"
#include "tests/support/fake_clock.h"
#include "tests/support/generic_config.h"
#include "tests/support/memory_store.h"
#include "tests/support/random_bytes.h"
#include "tests/support/reuse_support.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tree.h"

namespace sg::testing {
namespace {

class QuarantineTest : public ::testing::Test {
 protected:
  // gc dates the store's objects by this clock: the real time.
  void SetUp() override { clock_.SetNow(std::chrono::system_clock::now()); }

  StatusOr<SnapshotResult> Commit(const Tree& tree, std::optional<int64_t> step = std::nullopt) {
    const std::string src = dir_.Join("src-" + std::to_string(++sources_));
    WriteTree(src, tree);
    SnapshotRequest req;
    req.job = "job";
    req.instance = "i-test";
    SG_ASSIGN_OR_RETURN(CapturedCheckpoint capture, CaptureTree(src, step));
    SnapshotWriter writer(store_, clock_, SnapshotOptions{});
    return writer.Write(capture, req);
  }
  Manifest Read(uint64_t seq) {
    auto m = SnapshotCatalog(store_, "job").ReadManifest(seq);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : Manifest{};
  }
  static const ManifestFile& FileOf(const Manifest& m, const std::string& path) {
    for (const ManifestFile& f : m.files) {
      if (f.path == path) return f;
    }
    static const ManifestFile none;
    ADD_FAILURE() << "no file " << path << " in snapshot " << m.seq;
    return none;
  }
  // Flips a bit of byte `at` of the object `key` (relative to "job/").
  void Damage(const std::string& key, uint64_t at) {
    auto body = store_.Get("job/" + key);
    ASSERT_TRUE(body.ok()) << body.status().ToString();
    (*body)[at] ^= 0x40;
    ASSERT_TRUE(store_.Put("job/" + key, *body, PutCondition::None()).ok());
  }
  std::set<std::string> Quarantined() {
    auto q = ReadQuarantine(store_, "job");
    EXPECT_TRUE(q.ok()) << q.status().ToString();
    return q.ok() ? *q : std::set<std::string>{};
  }
  StatusOr<RestoreResult> Restore(const std::string& to, ObjectStore* store = nullptr) {
    Restorer restorer(store ? *store : store_, RestoreOptions{});
    return restorer.Restore("job", dir_.Join(to), std::nullopt);
  }

  // A LoRA-style checkpoint: a frozen base of two frames (random bytes:
  // codec none, so damage shows as a digest that does not match), a small adapter.
  const std::string base_ = RandomBytes(kFrameSize + 1000, 11);
  Tree Lora(int step) {
    return {{"base.bin", {base_, 0644}}, {"adapter.bin", {RandomBytes(1000, 100 + step), 0644}}};
  }
  // Snapshot 1 needs nothing shared; 2 stores the base, 3 and 4 reference it.
  void CommitLoraHistory() {
    ASSERT_TRUE(Commit({{"other.bin", {RandomBytes(5000, 5), 0644}}}).ok());
    for (int step = 2; step <= 4; ++step) ASSERT_TRUE(Commit(Lora(step)).ok());
    ASSERT_EQ(FileOf(Read(4), "base.bin").frames[0].key, kShared);
  }
  const std::string kShared = "snapshots/0000000002/files/base.bin";

  FakeClock clock_;
  MemoryStore store_;
  TempDir dir_;
  int sources_ = 0;
};

TEST(QuarantineLayout, AQuarantineKeyNamesTheDataObjectItHolds) {
  const std::string data = "snapshots/0000000002/files/dir/base.bin.zst";
  EXPECT_EQ(QuarantinePrefix("job"), "job/quarantine/");
  EXPECT_EQ(QuarantineKey("job", data), "job/quarantine/" + data + ".json");
  EXPECT_EQ(QuarantinedKeyOf("job", QuarantineKey("job", data)), data);
  EXPECT_EQ(QuarantinedKeyOf("other", QuarantineKey("job", data)), std::nullopt);
  EXPECT_EQ(QuarantinedKeyOf("job", "job/quarantine/notes.json"), std::nullopt);
  EXPECT_EQ(QuarantinedKeyOf("job", "job/quarantine/" + data), std::nullopt) << "no .json";
  EXPECT_EQ(QuarantinedKeyOf("job", "job/snapshots/0000000002/manifest.json"), std::nullopt);
}

// Create-only: the first finder's account stays; a key that is no data
// object is never quarantined.
TEST_F(QuarantineTest, TheFirstFindersRecordStays) {
  QuarantineObjects(store_, "job", {kShared}, "verify", 3, "XXH3-128 does not match");
  QuarantineObjects(store_, "job", {kShared, "snapshots/0000000003/manifest.json"}, "restore", 4,
                    "again");
  EXPECT_EQ(Quarantined(), std::set<std::string>{kShared});
  auto body = store_.Get(QuarantineKey("job", kShared));
  ASSERT_TRUE(body.ok());
  auto j = nlohmann::json::parse(*body);
  EXPECT_EQ(j["key"], kShared);
  EXPECT_EQ(j["found_by"], "verify");
  EXPECT_EQ(j["seq"], 3);
  EXPECT_EQ(j["why"], "XXH3-128 does not match");
  EXPECT_FALSE(j["time"].get<std::string>().empty());
}

// The whole story of issue 34 item 4: a damaged shared base is found by a
// read (verify names it, restore quarantines it and falls back past every
// snapshot that needs it), and the next snapshot stores the base afresh
// instead of referencing the damaged object.
TEST_F(QuarantineTest, ADamagedSharedObjectIsQuarantinedAndTheNextSnapshotStoresItAfresh) {
  CommitLoraHistory();
  Damage(kShared, 100);  // inside the first frame, which 3 and 4 reference

  SnapshotFileReader verifier(store_, "job");
  EXPECT_FALSE(verifier.Verify(Read(4)).ok());
  EXPECT_EQ(verifier.damaged_objects(), std::vector<std::string>{kShared});

  auto r = Restore("out");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, 1u);
  EXPECT_EQ(r->quarantined, std::vector<std::string>{kShared});
  EXPECT_EQ(Quarantined(), std::set<std::string>{kShared});
  ASSERT_EQ(r->rejected.size(), 3u);
  for (size_t i : {1, 2}) {
    EXPECT_NE(r->rejected[i].find("needs the quarantined object(s) " + kShared),
              std::string::npos)
        << "passed over without a read: " << r->rejected[i];
  }

  auto fifth = Commit(Lora(5));
  ASSERT_TRUE(fifth.ok()) << fifth.status().ToString();
  const Manifest m = Read(5);
  const ManifestFile& base = FileOf(m, "base.bin");
  for (const ManifestFile& f : m.files) {
    for (const FrameRef& ref : f.frames) EXPECT_NE(ref.key, kShared) << f.path;
  }
  for (const FrameRef& ref : base.frames) EXPECT_EQ(ref.key, base.key) << "stored afresh";
  EXPECT_GE(fifth->new_bytes, base.stored_size);
  EXPECT_EQ(fifth->reused_bytes, 0u);

  auto again = Restore("again");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->seq, 5u);
  EXPECT_TRUE(again->rejected.empty());
  EXPECT_EQ(ReadTree(dir_.Join("again")), Lora(5));
}

// Retention with keep 1: the snapshots that need the quarantined base are
// not the kept good one, so the older clean one stays (before quarantine
// counted, it kept 4 alone and left nothing restorable). Once a clean
// snapshot is newer, they go, and so does the damaged object.
TEST_F(QuarantineTest, RetentionNeverCountsASnapshotThatNeedsAQuarantinedObject) {
  CommitLoraHistory();
  Damage(kShared, 100);
  QuarantineObjects(store_, "job", {kShared}, "verify", 4, "XXH3-128 does not match");

  const GcOptions keep_one{1, std::chrono::hours(1)};
  auto gc = CollectGarbage(store_, clock_, "job", keep_one);
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_TRUE(gc->deleted.empty()) << "1 is the kept good one; 2-4 are newer, uncounted";
  EXPECT_TRUE(gc->unquarantined.empty()) << "the damaged object is still there";
  EXPECT_EQ(*ReadQuarantine(store_, "job"), std::set<std::string>{kShared});
  auto r = Restore("out");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, 1u);

  ASSERT_TRUE(Commit(Lora(5)).ok());
  gc = CollectGarbage(store_, clock_, "job", keep_one);
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->deleted, (std::vector<uint64_t>{4, 3, 2, 1}));
  EXPECT_TRUE(store_.Head("job/" + kShared).status().Is(StatusCode::kNotFound));
  EXPECT_EQ(CountMissingReferences(store_, "job"), 0);
  // The entry goes with its object: it names nothing any more.
  EXPECT_EQ(gc->unquarantined, std::vector<std::string>{kShared});
  EXPECT_TRUE(ReadQuarantine(store_, "job")->empty());
  r = Restore("again");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seq, 5u);
  EXPECT_EQ(ReadTree(dir_.Join("again")), Lora(5));
}

// `run`'s start (RestoreAtStart): with the quarantine known, the snapshots
// that need the damaged object are not even read, and a local checkpoint
// that is one of them is not taken for one the store holds: it is uploaded
// first.
TEST_F(QuarantineTest, RunsStartNeverRestoresASnapshotThatNeedsAQuarantinedObject) {
  const std::string a = RandomBytes(kFrameSize + 10, 1), b = RandomBytes(kFrameSize + 20, 2);
  ASSERT_TRUE(Commit({{"step-1.bin", {a}}}, 1).ok());
  ASSERT_TRUE(Commit({{"step-2.bin", {b}}}, 2).ok());  // stores b
  ASSERT_TRUE(Commit({{"step-3.bin", {b}}}, 3).ok());  // references it
  const std::string shared = "snapshots/0000000002/files/step-2.bin";
  ASSERT_EQ(Read(3).files[0].frames[0].key, shared);
  Damage(shared, 7);
  QuarantineObjects(store_, "job", {shared}, "verify", 3, "XXH3-128 does not match");

  const Config config = GenericCheckpointConfig(dir_.Join("ckpt"), "step-*.bin");
  StepStore steps(store_);
  std::atomic<int> shared_reads{0};
  steps.AfterGet([&](const std::string& key) {
    if (key == "job/" + shared) ++shared_reads;
  });
  EventLog events(steps, clock_, "job", "i-test");
  auto start = RestoreAtStart(steps, clock_, config, events, nullptr);
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  EXPECT_EQ(start->state.last_seq, 1u);
  EXPECT_EQ(shared_reads, 0) << "snapshots 3 and 2 are passed over unread";
  EXPECT_EQ(ReadTree(config.checkpoint_dir), (Tree{{"step-1.bin", {a}}}));

  // The agent restarts on a machine whose disk holds step 3 (the bytes of
  // snapshot 3): the store has no good copy of it.
  WriteTree(config.checkpoint_dir, {{"step-3.bin", {b}}});
  clock_.Advance(std::chrono::seconds(5));
  auto local = RestoreAtStart(steps, clock_, config, events, nullptr);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_TRUE(local->state.upload_first) << "not 'already in the store'";
  EXPECT_EQ(local->state.resume, config.checkpoint_dir + "/step-3.bin");
}

}  // namespace
}  // namespace sg::testing
