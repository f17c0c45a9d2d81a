// Fencing trials: a lease holder (agent A) is cut off or stopped right around
// a commit, a second agent (B, another instance id) takes the lease over
// (generation 2), restores and commits; then A's held or late requests land.
// Readers (`ls --json`, `restore`) must never take A's generation-1 snapshot
// for newer than B's state:
//
//  - violation: `ls --json` lists a generation-1 snapshot whose seq is above
//    the snapshot B restored when it took over: A committed it after it had
//    lost the lease (a reader that lists it would also fall back to it, and
//    retention would keep it in place of a good one);
//  - violation: `restore --to <fresh dir>` restores anything but B's newest
//    generation-2 snapshot (a generation-1 one, or an older one; the restored
//    trainer file's step is checked against the ls row).
//
// Partition trials: the fault proxy freezes A's traffic at A's next manifest
// PUT (right after the pre-commit lease renewal) and releases it, late, once
// B has committed; the held manifest PUT must then land (else the trial did
// not exercise the scenario and fails as "scenario not reached").
// SIGSTOP trials: A (the agent process only; its trainer keeps writing) is
// stopped at varied moments of a snapshot (with the answer to its claim, a
// file upload, the pre-commit renewal or the manifest PUT held by the proxy
// until A is stopped) or at a seeded random offset after a commit, and
// continued (SIGCONT) once B has committed.
//
// SPOTGUARD_FENCE_TRIALS overrides the number of trials (20 each, 100 with
// SPOTGUARD_LONG_TESTS=1); SPOTGUARD_FENCE_SEED replays the SIGSTOP offsets.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "agent/repo/manifest.h"
#include "agent/repo/restorer.h"
#include "common/files.h"
#include "common/strings.h"
#include "tests/reliability/crash_support.h"
#include "tests/support/reliability_record.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int FenceTrials() {
  if (const char* n = std::getenv("SPOTGUARD_FENCE_TRIALS"); n != nullptr && std::atoi(n) > 0)
    return std::atoi(n);
  return LongReliabilityRun() ? 100 : 20;
}

uint64_t FenceSeed() {
  uint64_t seed = 0;
  if (const char* v = std::getenv("SPOTGUARD_FENCE_SEED"); v != nullptr && *v != '\0') {
    seed = std::strtoull(v, nullptr, 10);
  } else {
    seed = std::random_device{}();
  }
  std::cout << "SPOTGUARD_FENCE_SEED=" << seed << " (set it to replay)\n";
  return seed;
}

// Polls `cond` until it holds or `timeout` passes. The verdict never depends
// on a sleep: a condition that does not come is a failure naming it.
template <class F>
bool WaitUntil(F cond, std::chrono::milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  while (true) {
    if (cond()) return true;
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(50ms);
  }
}

std::string Tail(const std::string& text, size_t n = 3000) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

std::string Upstream(const std::string& endpoint) { return ProxyUpstream(endpoint); }

struct LsRow {
  uint64_t seq = 0;
  uint64_t generation = 0;
  std::optional<uint64_t> step;
  std::string instance;
};

// The step in a crash_trainer.py checkpoint's header, if the file is one.
std::optional<uint64_t> TrainerFileStep(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string header;
  if (!std::getline(in, header)) return std::nullopt;
  const std::string prefix = "spotguard-crash-trainer step=";
  if (!header.starts_with(prefix)) return std::nullopt;
  return std::strtoull(header.c_str() + prefix.size(), nullptr, 10);
}

enum class Mode { kPartition, kSigstop };

// What one trial saw.
struct Trial {
  std::string not_reached;  // non-empty: the scenario was not reached (a failure)
  std::string moment;       // SIGSTOP: where A was stopped
  bool late_gen1 = false;   // a generation-1 manifest landed after B's commit
  std::string late_what;
  int violations = 0;
  std::vector<std::string> what;  // the violations, in words
  std::optional<int> a_exit, b_exit;
  uint64_t gen2_commits = 0;
  bool restored_ok = false;
  std::string readers;  // "ls 5:g2 4:g2 3:g1; restore 5"
};

class FencingTrials : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(LoadS3TestEnv(&s3_));
    env_ = AgentEnv(s3_);
    env_["AWS_EC2_METADATA_DISABLED"] = "";  // each agent asks its own simulator
    cli_.env = AgentEnv(s3_);
    proxy_.emplace("fault_proxy.py", std::vector<std::string>{"--upstream", Upstream(s3_.endpoint)});
    ASSERT_FALSE(proxy_->endpoint().empty());
    imds_a_.emplace();
    imds_b_.emplace();
    ASSERT_FALSE(imds_a_->endpoint().empty());
    ASSERT_FALSE(imds_b_->endpoint().empty());
    imds_a_->Control("POST", "/_sim/identity", R"({"instanceId": "i-0fence0holder0000a"})");
    imds_b_->Control("POST", "/_sim/identity", R"({"instanceId": "i-0fence0taker00000b"})");
  }

  std::string WriteConfig(const std::string& prefix, const std::string& endpoint,
                          const std::string& name) {
    nlohmann::json c = {
        {"job", "job"},
        {"store", "s3://" + s3_.bucket + "/" + prefix},
        {"endpoint", endpoint},
        {"preset", "generic"},
        {"keep", 100},  // retention never hides what the readers are asked about
        {"patterns", {"step_*.ckpt"}},
        {"settle_time", "100ms"},
        {"upload_interval", "500ms"},
        {"stop_grace", "3s"},
        {"imds", {{"poll_interval", "2s"}}},
        {"lease", {{"heartbeat", "500ms"}, {"timeout", "2s"}}},
        {"command",
         {SPOTGUARD_PYTHON, SPOTGUARD_SOURCE_DIR "/tests/reliability/crash_trainer.py", "--out",
          "{checkpoint_dir}", "--mib", "0.02", "--every", "0.2"}},
        {"resume_args", {"--resume", "{resume}"}}};
    return dir_.WriteFile(name, c.dump(2));
  }

  nlohmann::json Stats() {
    return nlohmann::json::parse(proxy_->Control("GET", "/_proxy/stats"), nullptr, false);
  }
  void ProxyConfig(const nlohmann::json& j) { proxy_->Control("POST", "/_proxy/config", j.dump()); }
  // Leaves the proxy passing everything through again.
  void ProxyQuiet() {
    ProxyConfig({{"freeze_match", ""}, {"pause_match", ""}, {"pause_arm_match", ""}});
    (void)proxy_->Control("POST", "/_proxy/release");
    (void)proxy_->Control("POST", "/_proxy/continue");
  }

  Trial RunTrial(Mode mode, int index, std::mt19937_64& rng);
  void RunTrials(Mode mode, const std::string& record_name, const std::string& faults);
  // Deletes everything a trial left under its prefix.
  static void DeletePrefixOf(S3Store& store) {
    (void)store.CleanStaleWrites("", std::chrono::seconds(-3600), {});
    if (auto all = ListAll(store, ""); all.ok()) {
      for (const ObjectInfo& o : *all) (void)store.Delete(o.key);
    }
  }

  S3TestEnv s3_;
  std::map<std::string, std::string> env_;
  Cli cli_;
  TempDir dir_;
  std::optional<ToolServer> proxy_;
  std::optional<ImdsSimulator> imds_a_, imds_b_;
};

// Committed snapshots of the job: seq -> generation (manifests cached).
// Every manifest that landed in the store, fenced or not (the raw view, not
// the readers'), by seq, with its generation; remembered once seen, since
// retention removes fenced ones.
class Committed {
 public:
  explicit Committed(ObjectStore& store) : store_(store) {}
  const std::map<uint64_t, uint64_t>& Read() {
    auto objects = ListAll(store_, SnapshotsPrefix("job"));
    if (!objects.ok()) return gen_;  // a failed listing: try again at the next poll
    const size_t skip = SnapshotsPrefix("job").size();
    for (const ObjectInfo& o : *objects) {
      if (!o.key.ends_with("/manifest.json") || o.key.size() < skip + 10) continue;
      auto seq = ParseSeqName(std::string_view(o.key).substr(skip, 10));
      if (!seq || gen_.count(*seq)) continue;
      auto text = store_.Get(o.key);
      if (!text.ok()) continue;
      auto m = ParseManifest(*text, "job", *seq);
      if (m.ok()) gen_[*seq] = m->generation;
    }
    return gen_;
  }
  bool AnyOfGeneration(uint64_t g) {
    for (const auto& [seq, gen] : Read())
      if (gen == g) return true;
    return false;
  }

 private:
  ObjectStore& store_;
  std::map<uint64_t, uint64_t> gen_;
};

// `spotguard run` in the background; remembers its exit code (AgentProcess
// reports it once) and never signals a pid it no longer owns.
class Agent {
 public:
  Agent(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
        const std::string& log)
      : p_(args, env, log) {}
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    if (!exit_) exit_ = p_.Wait(timeout);
    return exit_;
  }
  bool Running() { return !Wait(0ms).has_value(); }
  void Signal(int signo) {
    if (Running() && p_.pid() > 0) ::kill(p_.pid(), signo);
  }
  std::string Output() const { return p_.Output(); }
  // Stops it and its trainer for good (a failed trial's clean-up).
  void KillAll() {
    if (!Running() || p_.pid() <= 0) return;
    ::kill(p_.pid(), SIGCONT);
    KillLikeALostInstance(p_);
    (void)Wait(30s);
  }

 private:
  AgentProcess p_;
  std::optional<int> exit_;
};

Trial FencingTrials::RunTrial(Mode mode, int index, std::mt19937_64& rng) {
  Trial t;
  const std::string tag = (mode == Mode::kPartition ? "p" : "s") + std::to_string(index);
  const std::string prefix = "rel-fence/" + RandomHex(6);
  auto store = OpenTestS3Store(s3_, prefix);
  if (!store) {
    t.not_reached = "cannot open the test store";
    return t;
  }
  Committed committed(*store);
  const std::string cfg_a = WriteConfig(prefix, proxy_->endpoint(), tag + "-a.json");
  const std::string cfg_b = WriteConfig(prefix, s3_.endpoint, tag + "-b.json");
  const std::string ckpt_a = dir_.Join(tag + "-ckpt-a"), ckpt_b = dir_.Join(tag + "-ckpt-b");
  ProxyQuiet();

  auto finish = [&](Trial& r) -> Trial& {
    DeletePrefixOf(*store);
    std::filesystem::remove_all(ckpt_a);
    std::filesystem::remove_all(ckpt_b);
    return r;
  };

  Agent a({"run", "-c", cfg_a, "--checkpoint-dir", ckpt_a, "--imds-endpoint",
                  imds_a_->endpoint(), "--log-level", "info"},
                 env_, dir_.Join(tag + "-a.log"));
  auto a_running = [&] { return a.Running(); };
  std::optional<Agent> b;
  auto fail = [&](const std::string& why) -> Trial& {
    t.not_reached = why;
    ProxyQuiet();
    a.KillAll();
    if (b) b->KillAll();
    return finish(t);
  };

  // 1. A holds the lease (generation 1) and has committed.
  if (!WaitUntil([&] { return committed.AnyOfGeneration(1) || !a_running(); }, 60s) ||
      !a_running()) {
    return fail("agent A committed no snapshot within 60 s (or ended): " + Tail(a.Output()));
  }

  // 2. A is cut off (partition) or stopped (SIGSTOP) around its next commit.
  uint64_t held_seq = 0;
  if (mode == Mode::kPartition) {
    ProxyConfig({{"freeze_match", "PUT [^ ]*/snapshots/[0-9]{10}/manifest\\.json"}});
    nlohmann::json st;
    if (!WaitUntil(
            [&] {
              st = Stats();
              return st.value("frozen", false) || !a_running();
            },
            30s) ||
        !st.value("frozen", false)) {
      return fail("A's next manifest PUT did not come within 30 s: " + Tail(a.Output()));
    }
    const std::string first = st["held_requests"].empty() ? "" : st["held_requests"][0];
    std::smatch m;
    if (!std::regex_search(first, m, std::regex("/snapshots/([0-9]{10})/manifest\\.json"))) {
      return fail("the first held request is not a manifest PUT: " + first);
    }
    held_seq = std::stoull(m[1]);
    t.moment = "manifest PUT held";
  } else {
    // The moments, in turn: the answer to the claim, to a file upload, to the
    // lease renewal that precedes the commit (twice: the window the fix is
    // about), to the manifest PUT (committed, but A does not know yet), and a
    // seeded random offset after a commit.
    static const std::vector<std::pair<std::string, nlohmann::json>> kMoments = {
        {"after the pre-commit renewal",
         {{"pause_arm_match", "PUT [^ ]*/snapshots/[0-9]{10}/files/"},
          {"pause_match", "PUT [^ ]*/job/lease$"}}},
        {"after the claim", {{"pause_match", "PUT [^ ]*/snapshots/[0-9]{10}/claim$"}}},
        {"after the pre-commit renewal",
         {{"pause_arm_match", "PUT [^ ]*/snapshots/[0-9]{10}/files/"},
          {"pause_match", "PUT [^ ]*/job/lease$"}}},
        {"after a file upload", {{"pause_match", "PUT [^ ]*/snapshots/[0-9]{10}/files/"}}},
        {"after the manifest PUT",
         {{"pause_match", "PUT [^ ]*/snapshots/[0-9]{10}/manifest\\.json$"}}},
        {"random offset after a commit", nullptr},
    };
    const auto& [moment, pause] = kMoments[static_cast<size_t>(index) % kMoments.size()];
    t.moment = moment;
    if (!pause.is_null()) {
      ProxyConfig(pause);
      nlohmann::json st;
      if (!WaitUntil(
              [&] {
                st = Stats();
                return st.value("paused", false) || !a_running();
              },
              30s) ||
          !st.value("paused", false)) {
        return fail("the proxy saw no request of A to pause (" + moment +
                    ") within 30 s: " + Tail(a.Output()));
      }
      a.Signal(SIGSTOP);
      (void)proxy_->Control("POST", "/_proxy/continue");  // into the stopped agent's socket
    } else {
      const size_t n = committed.Read().size();
      if (!WaitUntil([&] { return committed.Read().size() > n || !a_running(); }, 30s) ||
          !a_running()) {
        return fail("A committed nothing more within 30 s: " + Tail(a.Output()));
      }
      // Where in A's cycle (upload_interval 500 ms) the stop lands.
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 1000)(rng)));
      a.Signal(SIGSTOP);
    }
    if (!a_running()) return fail("A ended before it was stopped: " + Tail(a.Output()));
  }

  // 3. B takes the lease over (generation 2), restores and commits.
  b.emplace(std::vector<std::string>{"run", "-c", cfg_b, "--checkpoint-dir", ckpt_b,
                                     "--imds-endpoint", imds_b_->endpoint(), "--log-level",
                                     "info"},
            env_, dir_.Join(tag + "-b.log"));
  if (!WaitUntil([&] { return committed.AnyOfGeneration(2) || b->Wait(0ms).has_value(); }, 60s) ||
      !committed.AnyOfGeneration(2)) {
    return fail("agent B committed no generation-2 snapshot within 60 s: " + Tail(b->Output()));
  }
  const std::map<uint64_t, uint64_t> before_late = committed.Read();

  // 4. A's late requests land: the release of the freeze, or SIGCONT.
  if (mode == Mode::kPartition) {
    const nlohmann::json rel =
        nlohmann::json::parse(proxy_->Control("POST", "/_proxy/release"), nullptr, false);
    int status = -1;
    if (rel.is_object()) {
      for (const auto& r : rel["requests"]) {
        if (r["path"].get<std::string>().find(SeqName(held_seq) + "/manifest.json") !=
            std::string::npos) {
          status = r["status"].get<int>();
          break;
        }
      }
    }
    // The PUT's 200 is the proof it landed; the manifest itself may already
    // be gone again (B's retention deletes a fenced writer's commits).
    auto m = SnapshotCatalog(*store, "job").ReadManifest(held_seq);
    const bool gone = !m.ok() && m.status().Is(StatusCode::kNotFound);
    if (status != 200 || (!gone && (!m.ok() || m->generation != 1))) {
      return fail("scenario not reached: the held manifest PUT of snapshot " + SeqName(held_seq) +
                  " did not land after the release (status " + std::to_string(status) + ", " +
                  (m.ok() ? "generation " + std::to_string(m->generation)
                          : m.status().ToString()) +
                  ")");
    }
    t.late_gen1 = true;
    t.late_what = "generation-1 snapshot " + SeqName(held_seq) +
                  (gone ? " landed after B's commit (and was removed as fenced)"
                        : " (step " + (m->step ? std::to_string(*m->step) : std::string("-")) +
                              ") landed after B's commit");
  } else {
    a.Signal(SIGCONT);
  }

  // 5. A must see that it was fenced and stop.
  t.a_exit = a.Wait(60s);
  if (!t.a_exit) return fail("agent A did not exit within 60 s after the late requests");
  if (mode == Mode::kSigstop) {
    for (const auto& [seq, gen] : committed.Read()) {
      if (!before_late.count(seq) && gen == 1) {
        t.late_gen1 = true;
        t.late_what = "generation-1 snapshot " + SeqName(seq) + " landed after SIGCONT";
      }
    }
  }
  // B stops cleanly, so the readers look at a store nobody writes any more.
  b->Signal(SIGTERM);
  t.b_exit = b->Wait(60s);
  if (!t.b_exit) return fail("agent B did not exit within 60 s of SIGTERM");
  const std::string a_log = a.Output(), b_log = b->Output();

  // Opt-in (SPOTGUARD_FENCE_INJECT_ABOVE=1): the store state of the reported
  // incident, where the fenced writer's late manifest sits ABOVE the new
  // holder's newest seq. The agent itself does not reach it here (its late
  // manifest always lands below B's seqs: B claims after its takeover, which
  // follows A's claim and renewal), so the test writes a copy of A's late
  // generation-1 snapshot at the next free seq. This shows what the reader
  // check does with such a state (today: readers take it), not what the
  // agent does; it is off in the suite.
  if (const char* v = std::getenv("SPOTGUARD_FENCE_INJECT_ABOVE");
      v != nullptr && std::string(v) == "1" && held_seq != 0) {
    uint64_t top = 0;
    if (auto all = ListAll(*store, SnapshotsPrefix("job")); all.ok()) {
      for (const ObjectInfo& o : *all)
        if (auto q = ParseSeqName(std::string_view(o.key).substr(SnapshotsPrefix("job").size(), 10)))
          top = std::max(top, *q);
    }
    const uint64_t to = top + 1;
    auto text = store->Get(ManifestKey("job", held_seq), std::nullopt, nullptr);
    auto j = text.ok() ? nlohmann::ordered_json::parse(*text, nullptr, false)
                       : nlohmann::ordered_json();
    if (j.is_object()) {
      j["seq"] = to;
      for (auto& f : j["files"]) {
        std::string key = f["key"].template get<std::string>();
        const std::string from_key = JobPrefix("job") + key;
        const size_t at = key.find(SeqName(held_seq));
        if (at != std::string::npos) key.replace(at, 10, SeqName(to));
        if (auto body = store->Get(from_key, std::nullopt, nullptr); body.ok())
          (void)store->Put(JobPrefix("job") + key, *body, PutCondition::None());
        f["key"] = key;
      }
      (void)store->Put(ManifestKey("job", to), j.dump(1), PutCondition::CreateOnly());
      t.late_what += "; injected a copy at " + SeqName(to);
    }
  }

  // 6. The readers.
  CommandResult ls = cli_.Run({"ls", "--json", "-c", cfg_b});
  auto rows_json = nlohmann::json::parse(ls.out, nullptr, false);
  if (ls.exit_code != 0 || !rows_json.is_array()) {
    return fail("spotguard ls --json failed (exit " + std::to_string(ls.exit_code) + "): " +
                ls.out + ls.err);
  }
  std::map<uint64_t, LsRow> rows;
  uint64_t newest_gen2 = 0;
  for (const auto& r : rows_json) {
    LsRow row;
    row.seq = r.value("seq", uint64_t{0});
    row.generation = r.value("generation", uint64_t{0});
    if (r.contains("step") && r["step"].is_number_unsigned()) row.step = r["step"].get<uint64_t>();
    row.instance = r.value("instance", "");
    rows[row.seq] = row;
    if (row.generation >= 2) {
      ++t.gen2_commits;
      newest_gen2 = std::max(newest_gen2, row.seq);
    }
  }
  if (newest_gen2 == 0) return fail("ls lists no generation-2 snapshot:\n" + ls.out);
  auto step_text = [](const LsRow& r) { return r.step ? std::to_string(*r.step) : "-"; };
  // B's state descends from the snapshot it restored when it took over; a
  // generation-1 snapshot above that one was committed by a writer that had
  // already lost the lease.
  std::smatch restored_match;
  if (!std::regex_search(b_log, restored_match, std::regex("restored snapshot ([0-9]{10})"))) {
    return fail("B's log names no restored snapshot:\n" + Tail(b_log));
  }
  const uint64_t b_restored = std::stoull(restored_match[1]);
  for (const auto& [seq, row] : rows) {
    if (row.generation < 2 && seq > b_restored) {
      ++t.violations;
      t.what.push_back("ls lists generation-" + std::to_string(row.generation) + " snapshot " +
                       SeqName(seq) + " (step " + step_text(row) + ", " + row.instance +
                       "), committed after generation 2 took over from snapshot " +
                       SeqName(b_restored) + "; the newest generation-2 snapshot is " +
                       SeqName(newest_gen2) + " (step " + step_text(rows[newest_gen2]) + ")");
    }
  }
  const std::string into = dir_.Join(tag + "-restored");
  CommandResult restore = cli_.Run({"restore", "-c", cfg_b, "--to", into, "--log-level", "info"});
  std::smatch m;
  const std::string restore_log = restore.err;
  if (restore.exit_code != 0 ||
      !std::regex_search(restore_log, m, std::regex("restored snapshot ([0-9]{10})"))) {
    return fail("spotguard restore failed (exit " + std::to_string(restore.exit_code) +
                "): " + restore.out + restore.err);
  }
  const uint64_t got = std::stoull(m[1]);
  const std::string resume = std::string(Trim(restore.out));
  const std::optional<uint64_t> file_step = TrainerFileStep(resume);
  const LsRow want = rows[newest_gen2];
  const LsRow got_row = rows.count(got) ? rows[got] : LsRow{got, 0, std::nullopt, "?"};
  if (got_row.generation < 2) {
    ++t.violations;
    t.what.push_back("restore restored generation-" + std::to_string(got_row.generation) +
                     " snapshot " + SeqName(got) + " (resume " + resume + ", step " +
                     (file_step ? std::to_string(*file_step) : "?") +
                     ") while generation-2 snapshot " + SeqName(newest_gen2) + " (step " +
                     step_text(want) + ") exists");
  } else if (got != newest_gen2 || !file_step || file_step != want.step) {
    ++t.violations;
    t.what.push_back("restore restored snapshot " + SeqName(got) + " (resume " + resume +
                     ", step " + (file_step ? std::to_string(*file_step) : "?") +
                     "), not B's newest generation-2 snapshot " + SeqName(newest_gen2) +
                     " (step " + step_text(want) + ")");
  } else {
    t.restored_ok = true;
  }
  std::filesystem::remove_all(into);
  t.readers = "ls";
  for (auto it = rows.rbegin(); it != rows.rend(); ++it)
    t.readers += " " + std::to_string(it->first) + ":g" + std::to_string(it->second.generation);
  t.readers += "; restore " + std::to_string(got) + " (step " +
               (file_step ? std::to_string(*file_step) : "?") + ")";
  if (t.a_exit != 4) {
    ADD_FAILURE() << "trial " << tag << ": agent A ended with " << *t.a_exit
                  << ", not 4 (fenced):\n"
                  << Tail(a_log);
  }
  if (t.b_exit != 75) {  // stopped by SIGTERM before completion
    ADD_FAILURE() << "trial " << tag << ": agent B ended with " << *t.b_exit
                  << " after SIGTERM:\n"
                  << Tail(b_log);
  }
  if (std::getenv("SPOTGUARD_FENCE_DEBUG") != nullptr) {
    const nlohmann::json st = Stats();
    std::cout << "A's log:\n" << Tail(a_log, 2500) << "\nproxy log:\n";
    const auto& log = st["log"];
    for (size_t i = log.size() > 25 ? log.size() - 25 : 0; i < log.size(); ++i)
      std::cout << "  " << log[i].get<std::string>() << "\n";
  }
  if (t.violations > 0) {
    std::cout << "trial " << tag << " (" << t.moment << "): " << t.violations
              << " violation(s):\n  ls: " << ls.out << "\n  A's log:\n"
              << Tail(a_log, 1500) << "\n  B's log:\n"
              << Tail(b_log, 1500) << "\n";
  }
  return finish(t);
}

std::string JoinCounts(const std::map<std::string, int>& counts) {
  std::string out;
  for (const auto& [k, v] : counts) out += (out.empty() ? "" : ", ") + k + " " + std::to_string(v);
  return out;
}

void FencingTrials::RunTrials(Mode mode, const std::string& record_name,
                              const std::string& faults) {
  const uint64_t seed = FenceSeed();
  std::mt19937_64 rng(seed);
  const int trials = FenceTrials();
  const auto start = Clock::now();
  int violations = 0, not_reached = 0, late = 0, restored = 0, fenced = 0;
  long gen2 = 0;
  std::map<std::string, int> moments, late_by_moment;
  std::vector<std::string> examples;
  for (int i = 0; i < trials; ++i) {
    const auto t0 = Clock::now();
    Trial t = RunTrial(mode, i, rng);
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    std::cout << "trial " << i << " [" << t.moment << "] " << secs << " s: "
              << (t.not_reached.empty() ? "" : "NOT REACHED: " + t.not_reached + "; ")
              << (t.late_gen1 ? t.late_what : "no late generation-1 manifest") << "; A exit "
              << (t.a_exit ? std::to_string(*t.a_exit) : "-") << "; " << t.readers << "; violations "
              << t.violations << "\n";
    for (const std::string& w : t.what) std::cout << "  VIOLATION: " << w << "\n";
    if (!t.not_reached.empty()) {
      ++not_reached;
      ADD_FAILURE() << "trial " << i << " (" << t.moment << "): " << t.not_reached;
      continue;
    }
    ++moments[t.moment];
    if (t.late_gen1) {
      ++late;
      ++late_by_moment[t.moment];
    }
    if (t.a_exit == 4) ++fenced;
    if (t.restored_ok) ++restored;
    gen2 += static_cast<long>(t.gen2_commits);
    violations += t.violations;
    if (examples.size() < 3)
      for (const std::string& w : t.what) examples.push_back("trial " + std::to_string(i) + ": " + w);
  }
  const double total = std::chrono::duration<double>(Clock::now() - start).count();

  ReliabilityRecord rec;
  rec.test = record_name;
  rec.area = "fencing";
  rec.faults = faults;
  rec.trials = trials;
  rec.faults_injected = trials - not_reached;
  rec.committed = gen2;
  rec.restored = restored;
  rec.lost = violations;
  rec.detail = std::to_string(violations) + " violations; " + std::to_string(late) +
               " trials with a generation-1 manifest landing after the generation-2 commit" +
               (late_by_moment.empty() ? "" : " (" + JoinCounts(late_by_moment) + ")") + "; " +
               std::to_string(fenced) + " times A exited 4 (fenced); " +
               std::to_string(not_reached) + " trials did not reach the scenario" +
               (mode == Mode::kSigstop ? "; stopped: " + JoinCounts(moments) +
                                             "; seed " + std::to_string(seed)
                                       : "") +
               "; " + std::to_string(static_cast<int>(total)) + " s";
  std::cout << record_name << ": " << rec.detail << "\n";
  EXPECT_TRUE(WriteReliabilityRecord(rec));
  EXPECT_EQ(not_reached, 0) << "trials that did not reach the scenario fail rather than count";
  std::string shown;
  for (const std::string& e : examples) shown += "\n  " + e;
  EXPECT_EQ(violations, 0) << violations << " fencing violations in " << trials
                           << " trials; first ones:" << shown;
}

TEST_F(FencingTrials, PartitionAfterThePreCommitRenewalNeverLetsALateManifestWin) {
  RunTrials(Mode::kPartition, "fencing_partition_after_renewal",
            "fencing: partition after renewal (fault proxy freezes the holder's traffic from its "
            "manifest PUT until a second agent took generation 2 and committed, then forwards "
            "it late)");
}

TEST_F(FencingTrials, SigstopOfTheHolderAroundACommitNeverLetsALateManifestWin) {
  RunTrials(Mode::kSigstop, "fencing_sigstop_holder",
            "fencing: SIGSTOP of the holder (agent only) after its claim, a file upload, the "
            "pre-commit renewal, the manifest PUT, or at a random offset; SIGCONT once a second "
            "agent took generation 2 and committed");
}

}  // namespace
}  // namespace sg::testing
