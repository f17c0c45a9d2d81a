// A live writer is known by its claim, not by an age guess (docs/design.md §4,
// "Live writers"): gc never deletes what a writer whose claim is live may
// reference, whatever `--older-than` says, and a writer whose claim was
// broken commits nothing. The interleavings are driven: gc runs inside the
// writer's own store calls.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "agent/repo/claim_keeper.h"
#include "agent/repo/restorer.h"
#include "agent/repo/retention.h"
#include "agent/repo/store_layout.h"
#include "tests/support/faulty_store.h"
#include "tests/support/file_store_fixture.h"
#include "tests/support/memory_store.h"
#include "tests/support/random_bytes.h"
#include "tests/support/reuse_support.h"

namespace sg::testing {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

class LiveClaimTest : public FileStoreTest {
 protected:
  void SetUp() override {
    FileStoreTest::SetUp();
    // 1: a base and an adapter; 2: neither. With keep 1, retention drops 1
    // while the third writer references its base.
    ASSERT_TRUE(CommitTree(StepTree(1)).ok());
    ASSERT_TRUE(CommitTree({{"other.bin", {RandomBytes(kFrameSize, 7), 0644}}}).ok());
  }

  // A LoRA-style tree: a frozen base shared by every step, an adapter of
  // two frames that changes (uploaded through a writer, in parts).
  Tree StepTree(int step) {
    return {{"adapter.bin", {RandomBytes(2 * kFrameSize, 100 + step), 0644}},
            {"base.bin", {base_, 0644}}};
  }

  // Writes step 3 through `store`, with `before_commit` as the request's
  // last hook before the commit.
  StatusOr<SnapshotResult> WriteThird(ObjectStore& store, std::function<Status()> before_commit) {
    const std::string src = dir_.Join("src-third");
    WriteTree(src, StepTree(3));
    SG_ASSIGN_OR_RETURN(CapturedCheckpoint capture, CaptureTree(src, std::nullopt));
    SnapshotRequest request;
    request.job = "job";
    request.instance = "i-test";
    request.verify_before_commit = std::move(before_commit);
    SnapshotWriter writer(store, clock_, SnapshotOptions{});
    return writer.Write(capture, request);
  }

  Status GcAsOlderThanZero() {
    return CollectGarbage(*store_, clock_, "job", GcOptions{1, seconds(0)}).status();
  }

  bool Exists(const std::string& key) { return store_->Head(key).ok(); }

  const std::string base_ = RandomBytes(3 * kFrameSize - 1000, 11);
};

// `gc --older-than 0s` in the middle of the third writer's upload (its
// adapter's writer has begun, its base is referenced in snapshot 1): the
// writer's claim is live, so nothing it indexed or staged goes, and its
// snapshot commits whole.
TEST_F(LiveClaimTest, GcWithOlderThanZeroDuringAnUploadDeletesNothingTheWriterNeeds) {
  StepStore steps(*store_);
  Status gc;
  steps.BeforeStep([&](const StepStore::Op& op) {
    if (op.kind != StepStore::Kind::kAppend || steps.hooked()) return;
    if (!op.key.starts_with(SnapshotPrefix("job", 3))) return;
    steps.set_hooked();
    clock_.Advance(minutes(2));  // every object is older than "now - 0s"
    gc = GcAsOlderThanZero();
  });
  auto third = WriteThird(steps, nullptr);
  ASSERT_TRUE(steps.hooked()) << "the adapter was uploaded through a writer";
  ASSERT_TRUE(gc.ok()) << gc.ToString();
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_GT(third->reused_bytes, 0u) << "the base is referenced, not uploaded";
  EXPECT_EQ(CountMissingReferences(*store_, "job"), 0);
  Restorer restorer(*store_, RestoreOptions{});
  auto restored = restorer.Restore("job", dir_.Join("out"), std::nullopt);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->seq, 3u);
  EXPECT_EQ(ReadTree(dir_.Join("out")), StepTree(3));
  // Once the writer is done, the next gc may retire snapshot 1: its base
  // stays, for snapshot 3 references it.
  ASSERT_TRUE(GcAsOlderThanZero().ok());
  EXPECT_FALSE(Exists(ManifestKey("job", 1)));
  EXPECT_EQ(CountMissingReferences(*store_, "job"), 0);
}

// The writer stalls for eleven minutes before its commit: its claim is no
// longer live, and a gc takes it for dead (removes the claim, and snapshot
// 1's objects, which the writer references). The writer finds its claim
// gone and commits nothing.
TEST_F(LiveClaimTest, AWriterWhoseClaimGcRemovedCommitsNothing) {
  Status gc;
  auto third = WriteThird(*store_, [&] {
    clock_.Advance(minutes(11));
    gc = GcAsOlderThanZero();
    return Status::Ok();
  });
  ASSERT_TRUE(gc.ok()) << gc.ToString();
  EXPECT_FALSE(Exists(ClaimKey("job", 3))) << "gc took the stalled writer for dead";
  ASSERT_FALSE(third.ok()) << "committed snapshot " << third->seq << " after its claim was lost";
  EXPECT_TRUE(third.status().Is(StatusCode::kUnavailable)) << third.status().ToString();
  EXPECT_NE(third.status().message().find("claim"), std::string::npos) << third.status().ToString();
  EXPECT_FALSE(Exists(ManifestKey("job", 3)));
  EXPECT_EQ(CountMissingReferences(*store_, "job"), 0);
}

// The same stall with no gc meanwhile: the claim is still there, but for
// longer than a collector may wait nobody renewed it, so a gc could have
// deleted what the writer references. It commits nothing.
TEST_F(LiveClaimTest, AWriterWhoseClaimLapsedCommitsNothing) {
  auto third = WriteThird(*store_, [&] {
    clock_.Advance(minutes(6));
    return Status::Ok();
  });
  ASSERT_FALSE(third.ok()) << "committed after a lapse of its claim";
  EXPECT_NE(third.status().message().find("not renewed"), std::string::npos)
      << third.status().ToString();
  EXPECT_FALSE(Exists(ManifestKey("job", 3)));
  // A stall shorter than that commits.
  auto fourth = WriteThird(*store_, [&] {
    clock_.Advance(minutes(4));
    return Status::Ok();
  });
  ASSERT_TRUE(fourth.ok()) << fourth.status().ToString();
}

// A claim that another writer's listing sees, once the writer has stopped
// renewing it: live for kClaimTtl after its last renewal, then abandoned,
// even when its dir holds a younger object (--older-than 0s).
TEST_F(LiveClaimTest, AClaimIsLiveForItsTtlAfterItsLastRenewal) {
  ASSERT_TRUE(store_->Put(ClaimKey("job", 3), "{}", PutCondition::CreateOnly()).ok());
  clock_.Advance(kClaimTtl - minutes(1));
  ASSERT_TRUE(GcAsOlderThanZero().ok());
  EXPECT_TRUE(Exists(ClaimKey("job", 3)));
  clock_.Advance(minutes(2));
  ASSERT_TRUE(GcAsOlderThanZero().ok());
  EXPECT_FALSE(Exists(ClaimKey("job", 3)));
  // --break-claims takes a fresh one for dead too.
  ASSERT_TRUE(store_->Put(ClaimKey("job", 4), "{}", PutCondition::CreateOnly()).ok());
  GcOptions told{.keep = 1, .abandoned_after = seconds(0), .break_claims = true};
  ASSERT_TRUE(CollectGarbage(*store_, clock_, "job", told).ok());
  EXPECT_FALSE(Exists(ClaimKey("job", 4)));
}

// The keeper's thread renews the claim with conditional writes; one that
// finds the claim replaced stops and reports the break.
TEST(ClaimKeeperTest, RenewsUntilTheClaimIsReplaced) {
  MemoryStore store;
  const std::string key = ClaimKey("job", 1);
  auto etag = store.Put(key, "{}", PutCondition::CreateOnly());
  ASSERT_TRUE(etag.ok());
  ClaimTiming timing;
  timing.renew_every = std::chrono::milliseconds(5);
  ClaimKeeper keeper(store, SystemClock(), key, {{"instance", "i-test"}}, *etag,
                     SystemClock().Monotonic(), timing);
  keeper.Start();
  // Bounded only against a machine stalled for a minute.
  for (int i = 0; i < 12000 && keeper.renewals() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GE(keeper.renewals(), 2);
  auto body = store.Get(key);
  ASSERT_TRUE(body.ok());
  EXPECT_NE(body->find("\"renewed\""), std::string::npos) << *body;
  EXPECT_NE(body->find("i-test"), std::string::npos) << *body;
  ASSERT_TRUE(store.Put(key, "{\"other\":1}", PutCondition::None()).ok());  // replaced
  Status held = keeper.CheckHeld();
  EXPECT_TRUE(held.Is(StatusCode::kUnavailable)) << held.ToString();
  keeper.Stop();
  EXPECT_EQ(*store.Get(key), "{\"other\":1}") << "a broken claim is never written again";
}

// A renewal that the store carried out but whose answer was lost (a
// retried PUT then finds its own write and gets 412): the next renewal
// adopts it, by the claim's `writer` token, instead of calling the claim
// broken; a claim with another writer's token is not adopted.
TEST(ClaimKeeperTest, ARenewalWhoseAnswerWasLostIsAdopted) {
  MemoryStore base;
  FaultyStore store(base);
  const std::string key = ClaimKey("job", 1);
  const nlohmann::ordered_json body = {{"instance", "i-test"}, {"writer", "w1"}};
  auto etag = base.Put(key, body.dump(), PutCondition::CreateOnly());
  ASSERT_TRUE(etag.ok());
  ClaimKeeper keeper(store, SystemClock(), key, body, *etag, SystemClock().Monotonic());
  store.LoseAnswerOfPutOf("claim");
  ASSERT_TRUE(keeper.CheckHeld().ok()) << "a lost answer alone breaks nothing";
  Status held = keeper.CheckHeld();
  EXPECT_TRUE(held.ok()) << held.ToString();
  EXPECT_EQ(keeper.renewals(), 1);

  ASSERT_TRUE(base.Put(key, R"({"writer":"w2"})", PutCondition::None()).ok());
  EXPECT_TRUE(keeper.CheckHeld().Is(StatusCode::kUnavailable)) << "another writer's claim";
}

}  // namespace
}  // namespace sg::testing
