// kill -9 trials (issue #10, item 2): the real spotguard binary against the
// Ceph gateway, killed at seeded random moments during `snapshot`, `restore`
// and `run`. After every kill a fresh process must find exactly the newest
// committed snapshot, byte-identical to the tree it was taken from; a kill
// before the commit leaves the previous newest. After the trials `gc` must
// leave no multipart upload and no object that no manifest references.
//
// SPOTGUARD_CRASH_SEED replays a run; scripts/test.sh --long runs more trials.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "common/strings.h"
#include "tests/reliability/crash_support.h"
#include "tests/support/random_bytes.h"
#include "tests/support/reliability_record.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string JoinCounts(const std::map<std::string, int>& counts) {
  std::string out;
  for (const auto& [k, v] : counts) out += (out.empty() ? "" : ", ") + k + " " + std::to_string(v);
  return out;
}

class CrashTrials : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(LoadS3TestEnv(&s3_));
    prefix_ = "rel-crash/" + RandomHex(6);
    store_ = OpenTestS3Store(s3_, prefix_);
    ASSERT_NE(store_, nullptr);
    cli_.env = AgentEnv(s3_);
  }
  void TearDown() override {
    if (!store_) return;
    // Whatever the outcome, leave nothing on the shared gateway.
    (void)store_->CleanStaleWrites("", std::chrono::seconds(0));
    if (auto all = ListAll(*store_, ""); all.ok()) {
      for (const ObjectInfo& o : *all) (void)store_->Delete(o.key);
    }
  }

  std::string WriteConfig(nlohmann::json extra = nlohmann::json::object()) {
    nlohmann::json c = {{"job", "job"},
                        {"store", "s3://" + s3_.bucket + "/" + prefix_},
                        {"endpoint", s3_.endpoint},
                        {"preset", "generic"},
                        {"keep", 3}};
    for (auto& [k, v] : extra.items()) c[k] = v;
    return dir_.WriteFile("job-" + RandomHex(3) + ".json", c.dump(2));
  }

  std::vector<uint64_t> Committed() {
    auto c = SnapshotCatalog(*store_, "job").Committed();
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : std::vector<uint64_t>{};
  }
  // The highest seq under snapshots/, committed or not (claims only grow).
  uint64_t HighestSeq() {
    uint64_t highest = 0;
    auto all = ListAll(*store_, SnapshotsPrefix("job"));
    EXPECT_TRUE(all.ok()) << all.status().ToString();
    if (!all.ok()) return 0;
    for (const ObjectInfo& o : *all) {
      if (auto s = ParseSeqName(std::string_view(o.key).substr(SnapshotsPrefix("job").size(), 10)))
        highest = std::max(highest, *s);
    }
    return highest;
  }
  std::optional<uint64_t> Newest() {
    auto c = Committed();
    return c.empty() ? std::nullopt : std::optional<uint64_t>(c.front());
  }

  // A checkpoint tree that differs per trial: one file of two 8 MiB parts
  // (a multipart upload), one of a few MiB, some small ones; half of each
  // compresses, half does not.
  static Tree TrialTree(uint64_t seed, int trial) {
    Tree t;
    auto blob = [&](size_t n, unsigned salt) {
      std::string s = RandomBytes(n / 2, static_cast<unsigned>(seed) + salt * 7919u + trial);
      s += std::string(n - s.size(), static_cast<char>('a' + trial % 26));
      return s;
    };
    t["model.bin"] = {blob(13 << 20, 1), 0644};
    t["optim/state.bin"] = {blob(3 << 20, 2), 0600};
    t["meta/trial.json"] = {"{\"trial\": " + std::to_string(trial) + "}\n", 0644};
    t["meta/rng"] = {RandomBytes(4096, static_cast<unsigned>(seed) + 99u + trial), 0644};
    return t;
  }

  S3TestEnv s3_;
  std::string prefix_;
  std::unique_ptr<S3Store> store_;
  TempDir dir_;
  Cli cli_;
};

// Where a kill of `snapshot` landed, read from the store afterwards.
std::string SnapshotPhase(ObjectStore& store, uint64_t seq, const S3TestEnv& s3, S3Store& s3store,
                          const std::string& prefix) {
  auto objects = ListAll(store, SnapshotPrefix("job", seq));
  auto uploads = s3store.client().ListMultipartUploads(
      s3.bucket, prefix + "/" + SnapshotPrefix("job", seq));
  const bool any_upload = uploads.ok() && !uploads->empty();
  if (!objects.ok() || (objects->empty() && !any_upload)) return "before-claim";
  bool manifest = false, files = false;
  for (const ObjectInfo& o : *objects) {
    if (o.key == ManifestKey("job", seq)) manifest = true;
    if (o.key.find("/files/") != std::string::npos) files = true;
  }
  if (manifest) {
    auto latest = store.Get(LatestKey("job"));
    const bool moved = latest.ok() && ParseSeqName(std::string(Trim(*latest))) == seq;
    return moved ? "after-latest" : "manifest-before-latest";
  }
  if (files || any_upload) return "objects";
  return "claim";
}

TEST_F(CrashTrials, KillNineDuringSnapshotNeverTearsOrLosesACommittedSnapshot) {
  const uint64_t seed = CrashSeed("snapshot");
  std::mt19937_64 rng(seed);
  const int trials = TrialCount(20, 100);
  const std::string config = WriteConfig();
  const std::string src = dir_.Join("src");
  std::map<uint64_t, std::string> expected;  // committed seq -> digest of its tree

  // One uncrashed run: the baseline snapshot, and how long a snapshot takes.
  Tree tree = TrialTree(seed, 0);
  WriteTree(src, tree);
  const auto t0 = Clock::now();
  CommandResult first = cli_.Run({"snapshot", "-c", config, "--dir", src});
  const auto duration = Clock::now() - t0;
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  ASSERT_TRUE(Newest().has_value());
  expected[*Newest()] = TreeDigest(tree);
  const auto window = std::chrono::duration_cast<std::chrono::microseconds>(duration * 1.2);
  std::cout << "uncrashed snapshot took "
            << std::chrono::duration_cast<std::chrono::milliseconds>(duration).count()
            << " ms; kills spread over [0, " << window.count() / 1000 << " ms]\n";

  ReliabilityRecord rec;
  rec.test = "crash_snapshot_kill9";
  rec.area = "crash";
  rec.faults = "kill -9 of `spotguard snapshot` (16 MiB, multipart) at a random moment";
  std::map<std::string, int> phases;
  long committed = 1, restored = 0, lost = 0;

  for (int trial = 1; trial <= trials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial) + " seed " + std::to_string(seed));
    const std::optional<uint64_t> before = Newest();
    ASSERT_TRUE(before.has_value());
    const uint64_t highest_before = HighestSeq();
    std::filesystem::remove_all(src);
    tree = TrialTree(seed, trial);
    WriteTree(src, tree);
    const auto delay = std::chrono::microseconds(
        std::uniform_int_distribution<int64_t>(0, window.count())(rng));

    const std::string log = dir_.Join("snapshot-" + std::to_string(trial) + ".log");
    AgentProcess snap({"snapshot", "-c", config, "--dir", src}, cli_.env, log);
    std::this_thread::sleep_for(delay);
    const bool killed = KillLikeALostInstance(snap);
    const auto code = snap.Wait(60s);
    ASSERT_TRUE(code.has_value()) << snap.Output();
    if (!killed || *code != 128 + SIGKILL) {
      ASSERT_EQ(*code, 0) << "finished on its own, so it must have succeeded: " << snap.Output();
    }
    ++rec.faults_injected;

    const std::vector<uint64_t> now = Committed();
    ASSERT_FALSE(now.empty()) << "a kill took away every committed snapshot";
    const uint64_t newest = now.front();
    // Claims are strictly increasing, so the one this trial made (if any)
    // is the highest seq under snapshots/.
    const uint64_t highest = HighestSeq();
    const std::string phase =
        !killed || *code != 128 + SIGKILL
            ? "finished"
            : (highest == highest_before ? "before-claim"
                                         : SnapshotPhase(*store_, highest, s3_, *store_, prefix_));
    ++phases[phase];

    if (newest != *before) {
      // The kill came after the commit: the new snapshot is this trial's tree.
      ASSERT_GT(newest, *before);
      ASSERT_EQ(std::count_if(now.begin(), now.end(), [&](uint64_t s) { return s > *before; }), 1)
          << "one trial committed more than one snapshot";
      expected[newest] = TreeDigest(tree);
      ++committed;
    }
    // A fresh process restores the newest committed snapshot, byte for byte.
    const std::string into = dir_.Join("restored-" + std::to_string(trial));
    CommandResult r = cli_.Run({"restore", "-c", config, "--to", into});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    ASSERT_TRUE(expected.count(newest)) << "snapshot " << newest << " was never committed by us";
    const std::string got = TreeDigest(ReadTree(into));
    if (got == expected[newest]) {
      ++restored;
    } else {
      ++lost;
      ADD_FAILURE() << "restore of snapshot " << newest << " differs from the tree committed";
    }
    std::filesystem::remove_all(into);
    std::filesystem::remove(log);
  }

  // gc: orphans before and after.
  const PrefixAudit before_gc = AuditJob(*store_, s3_, prefix_, "job");
  // Every kill between claim and commit left its dir, and the snapshots
  // committed after it (each runs retention) did not take it away: a young
  // uncommitted dir may be a live writer's.
  EXPECT_EQ(before_gc.uncommitted_dirs, static_cast<size_t>(phases["claim"] + phases["objects"]))
      << JoinCounts(phases);
  // Multipart uploads are dated to the second: be sure the last is older.
  std::this_thread::sleep_for(1100ms);
  CommandResult gc = cli_.Run({"gc", "-c", config, "--older-than", "0s"});
  ASSERT_EQ(gc.exit_code, 0) << gc.out << gc.err;
  const PrefixAudit after_gc = AuditJob(*store_, s3_, prefix_, "job");
  EXPECT_EQ(after_gc.multipart_uploads, 0u);
  EXPECT_EQ(after_gc.orphans, 0u) << (after_gc.orphan_keys.empty() ? "" : after_gc.orphan_keys[0]);
  // And the newest committed snapshot survived gc intact.
  const uint64_t newest = *Newest();
  CommandResult last = cli_.Run({"restore", "-c", config, "--to", dir_.Join("after-gc")});
  ASSERT_EQ(last.exit_code, 0) << last.out << last.err;
  EXPECT_EQ(TreeDigest(ReadTree(dir_.Join("after-gc"))), expected[newest]);

  EXPECT_EQ(lost, 0);
  EXPECT_EQ(restored, trials);
  // The kills must have hit the inside of a snapshot, not only its edges.
  EXPECT_GT(phases["objects"] + phases["claim"], 0) << JoinCounts(phases);
  rec.trials = trials;
  rec.committed = committed;
  rec.restored = restored;
  rec.lost = lost;
  rec.detail = "seed " + std::to_string(seed) + "; kill landed: " + JoinCounts(phases) +
               "; before gc: " + std::to_string(before_gc.multipart_uploads) +
               " multipart uploads, " + std::to_string(before_gc.orphans) + " orphaned objects in " +
               std::to_string(before_gc.uncommitted_dirs) + " uncommitted dirs; after gc --older-than 0s: " +
               std::to_string(after_gc.multipart_uploads) + " and " +
               std::to_string(after_gc.orphans);
  std::cout << rec.detail << "\n";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
}

}  // namespace
}  // namespace sg::testing
