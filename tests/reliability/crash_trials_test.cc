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
#include "tests/e2e/e2e_base.h"
#include "tests/reliability/crash_support.h"
#include "tests/support/random_bytes.h"
#include "tests/support/reliability_record.h"
#include "tests/support/reuse_support.h"
#include "tests/support/subprocess.h"
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

class CrashTrials : public E2EBase {
 protected:
  void SetUp() override {
    UseS3("rel-crash");
    cli_.env = sg::testing::AgentEnv(s3_);
  }
  void TearDown() override {
    if (!store_) return;
    // Whatever the outcome, leave nothing on the shared gateway.
    (void)store_->CleanStaleWrites("", std::chrono::seconds(0), {});
    if (auto all = ListAll(*store_, ""); all.ok()) {
      for (const ObjectInfo& o : *all) (void)store_->Delete(o.key);
    }
  }

  std::string WriteConfig(nlohmann::json extra = nlohmann::json::object()) {
    return WriteJobConfig(
        "job-" + RandomHex(3),
        {{"job", "job"}, {"store", store_url_}, {"endpoint", s3_.endpoint}, {"preset", "generic"},
         {"keep", 3}},
        extra);
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

  // A checkpoint tree that differs per trial: one file of five 8 MiB parts
  // (a multipart upload), one of a few MiB, some small ones; half of each
  // compresses, half does not; plus one frame that never changes.
  static Tree TrialTree(uint64_t seed, int trial) {
    Tree t;
    auto blob = [&](size_t n, unsigned salt) {
      std::string s = RandomBytes(n / 2, static_cast<unsigned>(seed) + salt * 7919u + trial);
      s += std::string(n - s.size(), static_cast<char>('a' + trial % 26));
      return s;
    };
    t["model.bin"] = {blob(33 << 20, 1), 0644};
    t["optim/state.bin"] = {blob(3 << 20, 2), 0600};
    t["meta/trial.json"] = {"{\"trial\": " + std::to_string(trial) + "}\n", 0644};
    t["meta/rng"] = {RandomBytes(4096, static_cast<unsigned>(seed) + 99u + trial), 0644};
    // A frozen part that every trial saves unchanged (one frame): with frame
    // reuse, each snapshot references the object of the oldest one still
    // holding it, across retention.
    t["frozen/base.bin"] = {std::string(4 << 20, 'f') + RandomBytes(4 << 20, static_cast<unsigned>(seed)),
                            0644};
    return t;
  }

  void RestoreTrials(const std::string& config, const std::string& kind);

  Cli cli_;
};

// Where a kill of `snapshot` landed, read from the store afterwards.
std::string SnapshotPhase(ObjectStore& store, uint64_t seq, const S3TestEnv& s3, S3Store& s3store,
                          const std::string& prefix) {
  auto objects = ListAll(store, SnapshotPrefix("job", seq));
  auto uploads =
      s3store.client().ListMultipartUploads(s3.bucket, prefix + "/" + SnapshotPrefix("job", seq));
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
  if (any_upload) return "multipart upload";
  if (files) return "objects";
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
  rec.faults = "kill -9 of `spotguard snapshot` (44 MiB, multipart, one frame reused from an older snapshot) at a random moment";
  std::map<std::string, int> phases;
  long committed = 1, restored = 0, lost = 0;
  long kept_checked = 0, broken_kept = 0, reused_bytes = 0;

  // Random kills may all miss the inside of a snapshot: then more trials,
  // up to three times as many, rather than a pass that proved little.
  int trial = 1;
  auto inside = [&] { return phases["claim"] + phases["objects"] + phases["multipart upload"]; };
  for (; trial <= trials ||
         ((inside() == 0 || phases["multipart upload"] == 0) && trial <= 3 * trials);
       ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial) + " seed " + std::to_string(seed));
    const std::optional<uint64_t> before = Newest();
    ASSERT_TRUE(before.has_value());
    const uint64_t highest_before = HighestSeq();
    std::filesystem::remove_all(src);
    tree = TrialTree(seed, trial);
    WriteTree(src, tree);
    const auto delay =
        std::chrono::microseconds(std::uniform_int_distribution<int64_t>(0, window.count())(rng));

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

    // A request the killed process had already sent may still be carried
    // out by the server: let those land before reading the phase.
    std::this_thread::sleep_for(300ms);
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
                                         : SnapshotPhase(*store_, highest, s3_, *s3_store_, prefix_));
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
    // Frame reuse: no kept snapshot lost an object it references, whether
    // the kill landed in the upload, the commit or the retention after it.
    const ReferenceAudit refs = AuditReferences(*store_, "job");
    ASSERT_GT(refs.kept, 0);
    kept_checked += refs.kept;
    broken_kept += refs.broken;
    EXPECT_EQ(refs.broken, 0) << refs.missing << " missing references";
  }

  // One more snapshot, uncrashed: it runs retention, which must leave the
  // young uncommitted dirs alone (they could be a live writer's).
  std::filesystem::remove_all(src);
  tree = TrialTree(seed, 1000);
  WriteTree(src, tree);
  CommandResult final_snapshot = cli_.Run({"snapshot", "-c", config, "--dir", src});
  ASSERT_EQ(final_snapshot.exit_code, 0) << final_snapshot.out << final_snapshot.err;
  expected[*Newest()] = TreeDigest(tree);
  ++committed;

  // gc: orphans before and after.
  const PrefixAudit before_gc = AuditJob(*s3_store_, s3_, prefix_, "job");
  // Every kill between claim and commit left its dir (and every kill in a
  // multipart upload its upload), and the snapshots committed after it (each
  // runs retention) did not take them away. There can be more: a kill just
  // after a request was sent (the server may carry it out late), and a kill
  // during retention, which deletes old snapshots' manifests first and
  // leaves the rest of them for gc: one kill may leave several (a backlog
  // of two after an earlier trial was killed before its own retention), so
  // the bound counts every snapshot retention took, not every such kill.
  const std::vector<uint64_t> still = Committed();
  const size_t retired = static_cast<size_t>(std::count_if(
      expected.begin(), expected.end(), [&](const auto& e) {
        return std::find(still.begin(), still.end(), e.first) == still.end();
      }));
  const size_t late = static_cast<size_t>(phases["before-claim"] + inside()) + retired;
  EXPECT_GE(before_gc.uncommitted_dirs, static_cast<size_t>(inside())) << JoinCounts(phases);
  EXPECT_LE(before_gc.uncommitted_dirs, late) << JoinCounts(phases);
  EXPECT_GE(before_gc.multipart_uploads, static_cast<size_t>(phases["multipart upload"]))
      << JoinCounts(phases);
  EXPECT_LE(before_gc.multipart_uploads, late) << JoinCounts(phases);
  // Multipart uploads are dated to the second: be sure the last is older.
  std::this_thread::sleep_for(1100ms);
  CommandResult gc = cli_.Run({"gc", "-c", config, "--older-than", "0s", "--break-claims"});
  ASSERT_EQ(gc.exit_code, 0) << gc.out << gc.err;
  const PrefixAudit after_gc = AuditJob(*s3_store_, s3_, prefix_, "job");
  EXPECT_EQ(after_gc.multipart_uploads, 0u);
  EXPECT_EQ(after_gc.orphans, 0u) << ExplainOrphans(before_gc, after_gc, gc.out + gc.err);
  // And the newest committed snapshot survived gc intact.
  const uint64_t newest = *Newest();
  CommandResult last = cli_.Run({"restore", "-c", config, "--to", dir_.Join("after-gc")});
  ASSERT_EQ(last.exit_code, 0) << last.out << last.err;
  EXPECT_EQ(TreeDigest(ReadTree(dir_.Join("after-gc"))), expected[newest]);
  const ReferenceAudit after_gc_refs = AuditReferences(*store_, "job");
  EXPECT_EQ(after_gc_refs.broken, 0) << after_gc_refs.missing << " missing references after gc";
  kept_checked += after_gc_refs.kept;
  broken_kept += after_gc_refs.broken;
  // The trees share bytes between trials (the constant half of a blob), so
  // the kept snapshots reference each other's objects: the audit above
  // checked something.
  if (auto history = SnapshotCatalog(*store_, "job").History(); history.ok()) {
    for (const auto& e : history->entries) {
      if (e.manifest.ok()) reused_bytes += static_cast<long>(e.manifest->ReusedStored());
    }
  }
  EXPECT_GT(reused_bytes, 0) << "the kept snapshots reuse frames";

  const int ran = trial - 1;
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(restored, ran);
  // The kills must have hit the inside of a snapshot, not only its edges.
  EXPECT_GT(inside(), 0) << JoinCounts(phases);
  EXPECT_GT(phases["multipart upload"], 0) << JoinCounts(phases);
  rec.trials = ran;
  rec.committed = committed;
  rec.restored = restored;
  rec.lost = lost;
  rec.detail =
      "seed " + std::to_string(seed) + "; kill landed: " + JoinCounts(phases) +
      "; before gc: " + std::to_string(before_gc.multipart_uploads) + " multipart uploads, " +
      std::to_string(before_gc.orphans) + " orphaned objects in " +
      std::to_string(before_gc.uncommitted_dirs) +
      " uncommitted dirs; after gc --older-than 0s: " + std::to_string(after_gc.multipart_uploads) +
      " and " + std::to_string(after_gc.orphans) + "; frame reuse: " +
      std::to_string(kept_checked) + " kept snapshots checked after the kills and gc, " +
      std::to_string(broken_kept) + " with a missing reference";
  std::cout << rec.detail << "\n";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
}

// Restore trials against the store `config` names; `kind` goes into the
// record's name.
void CrashTrials::RestoreTrials(const std::string& config, const std::string& kind) {
  const uint64_t seed = CrashSeed("restore " + kind);
  std::mt19937_64 rng(seed);
  const int trials = TrialCount(20, 100);
  // The store holds a new snapshot; the target holds an older checkpoint.
  const Tree fresh = TrialTree(seed, 1);
  WriteTree(dir_.Join("src"), fresh);
  CommandResult snap = cli_.Run({"snapshot", "-c", config, "--dir", dir_.Join("src")});
  ASSERT_EQ(snap.exit_code, 0) << snap.out << snap.err;
  Tree old;
  old["model.bin"] = {RandomBytes(2 << 20, static_cast<unsigned>(seed) + 5u), 0644};
  old["old-only.txt"] = {"from the previous run\n", 0600};
  old["meta/trial.json"] = {"{\"trial\": \"old\"}\n", 0644};
  // The restore keeps what it did not write (docs/design.md §7): the files
  // the snapshot replaces go to a backup dir, the others stay in place.
  Tree merged = fresh;
  for (const auto& [rel, f] : old) merged.emplace(rel, f);
  const std::string old_digest = TreeDigest(old), new_digest = TreeDigest(merged);

  const std::string parent = dir_.Join("disk");
  const std::string target = parent + "/ckpt";
  const std::string temp_prefix = ".ckpt.spotguard-restore-";
  const std::string backup_prefix = "ckpt.spotguard-backup-";
  std::filesystem::create_directories(parent);
  const auto t0 = Clock::now();
  CommandResult measured = cli_.Run({"restore", "-c", config, "--to", dir_.Join("measure")});
  const auto duration = Clock::now() - t0;
  ASSERT_EQ(measured.exit_code, 0) << measured.out << measured.err;
  ASSERT_EQ(TreeDigest(ReadTree(dir_.Join("measure"))), TreeDigest(fresh));
  const auto window = std::chrono::duration_cast<std::chrono::microseconds>(duration * 1.2);
  std::cout << "uncrashed restore took "
            << std::chrono::duration_cast<std::chrono::milliseconds>(duration).count()
            << " ms; kills spread over [0, " << window.count() / 1000 << " ms]\n";

  ReliabilityRecord rec;
  rec.test = "crash_restore_kill9_" + kind;
  rec.area = "crash";
  rec.faults = "kill -9 of `spotguard restore` (44 MiB from " + kind +
               ", over an older checkpoint) at a random moment";
  std::map<std::string, int> outcomes;
  long lost = 0, restored = 0;
  std::set<std::string> known_temps;
  size_t temps_left_by_kills = 0;
  int trial = 1;
  for (; trial <= trials ||
         (outcomes["old, partial download left aside"] == 0 && trial <= 3 * trials);
       ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial) + " seed " + std::to_string(seed));
    std::filesystem::remove_all(target);
    WriteTree(target, old);
    // Temp dirs of the previous trial's killed restore stay where they are:
    // this restore must clean them up.
    const auto delay =
        std::chrono::microseconds(std::uniform_int_distribution<int64_t>(0, window.count())(rng));
    const std::string log = dir_.Join("restore-" + std::to_string(trial) + ".log");
    AgentProcess restore({"restore", "-c", config, "--to", target, "--force"}, cli_.env, log);
    std::this_thread::sleep_for(delay);
    const bool killed = KillLikeALostInstance(restore);
    const auto code = restore.Wait(60s);
    ASSERT_TRUE(code.has_value()) << restore.Output();
    const bool finished = !killed || *code != 128 + SIGKILL;
    if (finished) {
      ASSERT_EQ(*code, 0) << restore.Output();
    }
    ++rec.faults_injected;

    const std::string got = TreeDigest(ReadTree(target));
    const std::vector<std::string> temps = EntriesStartingWith(parent, temp_prefix);
    const std::vector<std::string> backups = EntriesStartingWith(parent, backup_prefix);
    // The parent holds the target, the temp dirs of killed restores, the
    // backups of replaced files, and nothing else.
    size_t entries = 0;
    for (const auto& e : std::filesystem::directory_iterator(parent)) {
      (void)e;
      ++entries;
    }
    EXPECT_EQ(entries, 1 + temps.size() + backups.size());
    size_t new_temps = 0;
    for (const std::string& t : temps) new_temps += known_temps.insert(t).second;
    temps_left_by_kills += new_temps;
    std::string outcome;
    if (got == old_digest) {
      outcome = new_temps == 0 ? "old, no temp dir left" : "old, partial download left aside";
    } else if (got == new_digest) {
      outcome = finished ? "new, finished"
                         : (new_temps == 0 ? "new, replaced files kept" : "new, old left aside");
      ++restored;
    } else {
      outcome = "MIXED";
      ++lost;
      std::string diff;
      for (const auto& [rel, f] : ReadTree(target)) {
        const bool in_old = old.count(rel) && old.at(rel) == f;
        const bool in_new = merged.count(rel) && merged.at(rel) == f;
        diff += "\n  " + rel + " (" + std::to_string(f.content.size()) + " bytes, mode " +
                std::to_string(f.mode) + "): " +
                (in_new   ? "new"
                 : in_old ? "old"
                          : "NEITHER");
      }
      ADD_FAILURE() << "after the kill " << target
                    << " is neither the old checkpoint nor the new one:" << diff;
    }
    EXPECT_TRUE(!finished || temps.empty()) << "a finished restore left " << temps.size();
    ++outcomes[outcome];
    std::filesystem::remove(log);
  }
  // One more restore, uncrashed: every leftover of the killed ones is gone.
  CommandResult last = cli_.Run({"restore", "-c", config, "--to", target, "--force"});
  ASSERT_EQ(last.exit_code, 0) << last.out << last.err;
  EXPECT_EQ(TreeDigest(ReadTree(target)), new_digest);
  if (TreeDigest(ReadTree(target)) == new_digest) ++restored;
  EXPECT_TRUE(EntriesStartingWith(parent, temp_prefix).empty())
      << "the next restore must settle the temp dirs of killed restores";
  // Every file the snapshots replaced was kept, byte for byte, and nothing
  // but such files: each swap left one backup (at once, or when a later
  // restore settled the temp dir of a killed one).
  const std::vector<std::string> backups = EntriesStartingWith(parent, backup_prefix);
  for (const std::string& b : backups) {
    for (const auto& [rel, f] : ReadTree(parent + "/" + b)) {
      auto it = old.find(rel);
      EXPECT_TRUE(it != old.end() && it->second.content == f.content)
          << b << "/" << rel << " is not a file of the old checkpoint";
    }
  }
  const long swapped = restored - 1;  // the trials that ended with the new checkpoint
  EXPECT_GE(static_cast<long>(backups.size()), swapped)
      << "a swap lost the files it replaced: " << JoinCounts(outcomes);

  EXPECT_EQ(lost, 0);
  EXPECT_GT(outcomes["old, partial download left aside"], 0)
      << "no kill landed inside a restore: " << JoinCounts(outcomes);
  rec.trials = trial - 1;
  rec.committed = 1;
  rec.restored = restored;
  rec.lost = lost;
  rec.detail = "seed " + std::to_string(seed) + "; after the kill: " + JoinCounts(outcomes) + "; " +
               std::to_string(temps_left_by_kills) +
               " temp dirs left beside the target by kills, all removed by later restores";
  std::cout << rec.detail << "\n";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
}

TEST_F(CrashTrials, KillNineDuringRestoreLeavesTheOldCheckpointOrTheWholeNewOne) {
  RestoreTrials(WriteConfig(), "s3");
}

TEST_F(CrashTrials, KillNineDuringRestoreFromAFileStoreLeavesOldOrWholeNew) {
  RestoreTrials(WriteConfig({{"store", "file://" + dir_.Join("file-store")}}), "file");
}

// The bytes tests/reliability/crash_trainer.py writes for `step`.
std::string TrainerCheckpoint(int64_t step, size_t size) {
  std::string out = "spotguard-crash-trainer step=" + std::to_string(step) + "\n";
  for (uint64_t i = 0; out.size() < size; ++i)
    out += Sha256(std::to_string(step) + ":" + std::to_string(i));
  out.resize(size);
  return out;
}

// Whether `dir` holds the files of snapshot `m` exactly as the trainer wrote
// them at the step the manifest names.
bool HoldsTrainerCheckpoint(const std::string& dir, const Manifest& m, std::string* why) {
  if (!m.step) {
    *why = "the manifest has no step";
    return false;
  }
  for (const ManifestFile& f : m.files) {
    auto got = ReadFileToString(dir + "/" + f.path);
    if (!got.ok()) {
      *why = got.status().ToString();
      return false;
    }
    if (*got != TrainerCheckpoint(*m.step, f.size) || got->size() != f.size) {
      *why = f.path + " differs from what the trainer wrote at step " + std::to_string(*m.step);
      return false;
    }
  }
  if (m.files.empty()) *why = "the snapshot holds no file";
  return !m.files.empty();
}

TEST_F(CrashTrials, KillNineOfTheAgentAndTrainerAndAFreshAgentResumesFromTheNewestCommit) {
  const uint64_t seed = CrashSeed("run");
  std::mt19937_64 rng(seed);
  const int trials = TrialCount(20, 100);
  ImdsSimulator imds;
  ASSERT_FALSE(imds.endpoint().empty());
  // The store behind a proxy that can hold an upload's answer, so that some
  // kills land in an upload for certain, whatever the machine's speed.
  ToolServer proxy("fault_proxy.py", {"--upstream", ProxyUpstream(s3_.endpoint)});
  ASSERT_FALSE(proxy.endpoint().empty());
  const std::string config =
      WriteConfig({{"endpoint", proxy.endpoint()},
                   {"patterns", {"step_*.ckpt"}},
                   {"settle_time", "200ms"},
                   {"upload_interval", "1s"},
                   {"stop_grace", "5s"},
                   {"imds", {{"poll_interval", "500ms"}}},
                   {"lease", {{"heartbeat", "1s"}, {"timeout", "3s"}}},
                   {"command",
                    {SPOTGUARD_PYTHON, SPOTGUARD_SOURCE_DIR "/tests/reliability/crash_trainer.py",
                     "--out", "{checkpoint_dir}", "--mib", "3", "--every", "0.3"}},
                   {"resume_args", {"--resume", "{resume}"}}});
  std::map<std::string, std::string> env = cli_.env;
  env["AWS_EC2_METADATA_DISABLED"] = "";  // the agent asks the simulator
  SnapshotCatalog catalog(*store_, "job");

  ReliabilityRecord rec;
  rec.test = "crash_run_kill9";
  rec.area = "crash";
  rec.faults = "kill -9 of `spotguard run` and its trainer's process group at a random moment";
  std::map<std::string, int> phases;
  long restored = 0, lost = 0, agent_restores = 0;
  std::set<uint64_t> committed_seen;
  std::chrono::microseconds window{0};

  int trial = 0;
  for (; trial < trials || (phases["upload in flight"] == 0 && trial < 3 * trials); ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial) + " seed " + std::to_string(seed));
    const std::optional<uint64_t> before = Newest();
    const uint64_t highest_before = HighestSeq();
    // A replacement instance: an empty checkpoint dir, the same instance id.
    const std::string ckpt = dir_.Join("ckpt-" + std::to_string(trial));
    const std::string log = dir_.Join("run-" + std::to_string(trial) + ".log");
    const auto start = Clock::now();
    AgentProcess agent(
        {"run", "-c", config, "--checkpoint-dir", ckpt, "--imds-endpoint", imds.endpoint()}, env,
        log);
    if (trial == 0) {
      // The measured run: how long until the second periodic commit.
      auto commits = [&] {
        const std::string out = agent.Output();
        size_t n = 0;
        for (size_t at = out.find("committed:"); at != std::string::npos;
             at = out.find("committed:", at + 1))
          ++n;
        return n;
      };
      while (commits() < 2 && Clock::now() - start < 120s) std::this_thread::sleep_for(20ms);
      ASSERT_GE(commits(), 2u) << agent.Output();
      window = std::chrono::duration_cast<std::chrono::microseconds>((Clock::now() - start) * 1.2);
      std::cout << "an agent commits its second snapshot after " << window.count() / 1200
                << " ms; kills spread over [0, " << window.count() / 1000 << " ms]\n";
    } else if (trial % 4 == 3) {
      // Driven: the kill lands while the answer to an upload's file PUT is held.
      proxy.Control(
          "POST", "/_proxy/config",
          R"({"pause_match": "PUT [^ ]*/snapshots/[0-9]+/files/", "pause_seconds": 120})");
      bool paused = false;
      for (auto until = Clock::now() + 60s; !paused && Clock::now() < until;
           std::this_thread::sleep_for(20ms)) {
        paused = nlohmann::json::parse(proxy.Control("GET", "/_proxy/stats"))["paused"].get<bool>();
      }
      EXPECT_TRUE(paused) << "no upload reached the store: " << agent.Output();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(
          std::uniform_int_distribution<int64_t>(0, window.count())(rng)));
    }
    const bool killed = KillLikeALostInstance(agent);
    proxy.Control("POST", "/_proxy/continue");  // the held answer goes to no one
    const auto code = agent.Wait(60s);
    ASSERT_TRUE(code.has_value()) << agent.Output();
    ASSERT_TRUE(killed && *code == 128 + SIGKILL)
        << "the agent ended by itself: " << agent.Output();
    ++rec.faults_injected;
    const std::string out = agent.Output();

    // What this agent did before it died.
    if (const size_t took = out.find("took the lease"); took != std::string::npos) {
      // Its own log's timestamps are not compared with ours: the lease must
      // simply have been taken, without waiting for a timeout.
      EXPECT_EQ(out.find("has not been renewed"), std::string::npos)
          << "the same instance must re-take its lease at once";
    }
    if (const size_t at = out.find("restored snapshot "); at != std::string::npos) {
      // The agent restored before its trainer started: the newest commit
      // there was when it started, byte-identical.
      ASSERT_TRUE(before.has_value()) << out;
      EXPECT_EQ(out.substr(at + 18, 10), SeqName(*before)) << out;
      auto m = catalog.ReadManifest(*before);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      std::string why;
      if (HoldsTrainerCheckpoint(ckpt, *m, &why)) {
        ++agent_restores;
      } else {
        ++lost;
        ADD_FAILURE() << "the agent's restore of " << SeqName(*before) << ": " << why;
      }
      const size_t started = out.find("started the trainer");
      if (started != std::string::npos) {
        EXPECT_GT(started, at) << "the trainer started before the restore";
      }
      if (const size_t resumed = out.find("resumed from "); resumed != std::string::npos) {
        EXPECT_NE(out.find("at step " + std::to_string(*m->step), resumed), std::string::npos)
            << out;
      }
    } else if (out.find("starting fresh") != std::string::npos) {
      EXPECT_FALSE(before.has_value()) << "a fresh start although a snapshot was committed";
    }
    for (size_t at = out.find("snapshot "); at != std::string::npos;
         at = out.find("snapshot ", at + 1)) {
      if (out.compare(at + 19, 11, " committed:") == 0) {
        if (auto s = ParseSeqName(out.substr(at + 9, 10))) committed_seen.insert(*s);
      }
    }

    const std::optional<uint64_t> newest = Newest();
    if (before) {
      ASSERT_TRUE(newest.has_value());
      ASSERT_GE(*newest, *before) << "a kill took away the newest committed snapshot";
    }
    std::string phase;
    if (out.find("started the trainer") == std::string::npos) {
      phase = "before the trainer started";
    } else if (HighestSeq() > std::max<uint64_t>(highest_before, newest.value_or(0))) {
      phase = "upload in flight";
    } else {
      phase = "training, no upload in flight";
    }
    ++phases[phase];
    if (newest) {
      committed_seen.insert(*newest);
      // A fresh process restores the newest commit, byte-identical.
      auto m = catalog.ReadManifest(*newest);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      const std::string into = dir_.Join("restored");
      CommandResult r = cli_.Run({"restore", "-c", config, "--to", into});
      ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
      std::string why;
      if (HoldsTrainerCheckpoint(into, *m, &why)) {
        ++restored;
      } else {
        ++lost;
        ADD_FAILURE() << "restore of " << SeqName(*newest) << ": " << why;
      }
      std::filesystem::remove_all(into);
    }
    std::filesystem::remove_all(ckpt);
    std::filesystem::remove(log);
  }

  // Whether a killed agent lived long enough to restore depends on timing;
  // this one is not killed: it must restore the newest commit, byte-identical,
  // before its trainer starts, and its trainer must resume from it. It is a
  // replacement with another instance id, so the dead agent's lease is not
  // its own: it takes it over only once the lease has gone unrenewed for
  // lease.timeout by its own clock (no wall-clock bound is asserted here).
  imds.Control("POST", "/_sim/identity", R"({"instanceId": "i-0replacement000001"})");
  {
    const std::optional<uint64_t> newest = Newest();
    ASSERT_TRUE(newest.has_value());
    auto m = catalog.ReadManifest(*newest);
    ASSERT_TRUE(m.ok() && m->step);
    const std::string ckpt = dir_.Join("ckpt-final");
    AgentProcess agent(
        {"run", "-c", config, "--checkpoint-dir", ckpt, "--imds-endpoint", imds.endpoint()}, env,
        dir_.Join("run-final.log"));
    ASSERT_TRUE(agent.WaitForOutput("at step " + std::to_string(*m->step), 120s)) << agent.Output();
    const std::string out = agent.Output();
    const size_t at = out.find("restored snapshot " + SeqName(*newest));
    ASSERT_NE(at, std::string::npos) << out;
    const size_t takeover = out.find("has not been renewed for");
    EXPECT_NE(takeover, std::string::npos) << out;
    EXPECT_LT(takeover, at) << "restored before the lease was taken over";
    EXPECT_NE(out.find("took the lease of job job (generation"), std::string::npos) << out;
    EXPECT_NE(out.find(", after i-"), std::string::npos) << out;
    EXPECT_GT(out.find("started the trainer"), at) << out;
    std::string why;
    if (HoldsTrainerCheckpoint(ckpt, *m, &why)) {
      ++agent_restores;
    } else {
      ++lost;
      ADD_FAILURE() << "the final agent's restore: " << why;
    }
    // Stop it cleanly.
    ::kill(agent.pid(), SIGTERM);
    const auto code = agent.Wait(60s);
    ASSERT_TRUE(code.has_value()) << agent.Output();
    EXPECT_EQ(*code, 75) << agent.Output();  // stopped before completion
    std::filesystem::remove_all(ckpt);
  }
  // gc, then the audit.
  const PrefixAudit before_gc = AuditJob(*s3_store_, s3_, prefix_, "job");
  std::this_thread::sleep_for(1100ms);
  CommandResult gc = cli_.Run({"gc", "-c", config, "--older-than", "0s", "--break-claims"});
  ASSERT_EQ(gc.exit_code, 0) << gc.out << gc.err;
  const PrefixAudit after_gc = AuditJob(*s3_store_, s3_, prefix_, "job");
  EXPECT_EQ(after_gc.multipart_uploads, 0u);
  EXPECT_EQ(after_gc.orphans, 0u) << ExplainOrphans(before_gc, after_gc, gc.out + gc.err);

  EXPECT_EQ(lost, 0);
  EXPECT_GE(agent_restores, 1);
  EXPECT_GT(phases["upload in flight"], 0) << JoinCounts(phases);
  rec.trials = trial;
  rec.committed = static_cast<long>(committed_seen.size());
  rec.restored = restored + agent_restores;
  rec.lost = lost;
  rec.detail =
      "seed " + std::to_string(seed) + "; kill landed: " + JoinCounts(phases) + "; " +
      std::to_string(agent_restores) + " restores by the next agent and " +
      std::to_string(restored) + " by `spotguard restore` byte-identical; before gc: " +
      std::to_string(before_gc.multipart_uploads) + " multipart uploads, " +
      std::to_string(before_gc.orphans) + " orphaned objects in " +
      std::to_string(before_gc.uncommitted_dirs) +
      " uncommitted dirs; after gc --older-than 0s: " + std::to_string(after_gc.multipart_uploads) +
      " and " + std::to_string(after_gc.orphans);
  std::cout << rec.detail << "\n";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
}

}  // namespace
}  // namespace sg::testing
