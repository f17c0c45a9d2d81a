// Network faults between the real `spotguard` binary and the Ceph gateway
// (issue #10 item 1): tests/tools/fault_proxy.py resets connections, loses
// answers, stalls and hangs them, answers 500 InternalError and 503 SlowDown,
// and cuts request and response bodies short; a network namespace adds
// packet loss and queueing on a veth link. Every snapshot must commit and
// restore byte-identical; a snapshot that cannot be uploaded must leave no
// committed trace. Each test writes a ReliabilityRecord (area "network").
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "tests/reliability/net_support.h"
#include "tests/support/random_bytes.h"
#include "tests/support/reliability_record.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

std::string RandomSuffix() {
  std::random_device rd;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  return buf;
}

std::string Upstream(const S3TestEnv& env) { return ProxyUpstream(env.endpoint); }

std::string ConfigJson(const nlohmann::json& j) { return j.dump(); }

// The faults every "mixed" run uses. A hang costs the client's 60 s stall
// timeout, so it has a test of its own and joins the mix only in --long runs.
std::vector<std::string> MixedKinds(bool with_hang) {
  std::vector<std::string> kinds = {"reset",       "lost_response", "stall",       "error500",
                                    "slowdown503", "cut_request",   "cut_response"};
  if (with_hang) kinds.push_back("hang");
  return kinds;
}

class NetworkFaults : public ::testing::Test {
 protected:
  static constexpr size_t kKeep = 3;

  void SetUp() override {
    ASSERT_TRUE(LoadS3TestEnv(&env_));
    prefix_ = "rel-net-" + RandomSuffix();
    direct_.store = "s3://" + env_.bucket + "/" + prefix_;
    direct_.endpoint = env_.endpoint;
    direct_.env = env_.AwsEnv();
    // Retention (`keep`) deletes older snapshots after each commit, through
    // the same faulty network; the tests check it kept the right ones.
    direct_.env["SPOTGUARD_KEEP"] = std::to_string(kKeep);
  }
  void TearDown() override {
    DeletePrefix(env_, prefix_);
    EXPECT_EQ(CountObjects(env_, prefix_), 0u) << "clean-up left objects under " << prefix_;
  }

  AgentTarget Through(const std::string& endpoint) const {
    AgentTarget t = direct_;
    t.endpoint = endpoint;
    return t;
  }

  // Committed snapshots as the gateway itself (no proxy) lists them.
  nlohmann::json List() {
    auto ls = RunAgent(direct_, {"ls", "--json"});
    EXPECT_EQ(ls.exit_code, 0) << ls.err;
    auto rows = nlohmann::json::parse(ls.out, nullptr, false);
    EXPECT_TRUE(rows.is_array()) << ls.out;
    EXPECT_EQ(CountOccurrences(ls.err, "warning"), 0) << "unreadable manifests: " << ls.err;
    return rows.is_array() ? rows : nlohmann::json::array();
  }

  // `rows` (ls --json) are exactly the newest kKeep of the committed `want`
  // (keyed by zero-padded seq, so in order).
  template <typename Map>
  void ExpectNewestKept(const nlohmann::json& rows, const Map& want) {
    std::set<std::string> expected, listed;
    for (auto it = want.rbegin(); it != want.rend() && expected.size() < kKeep; ++it) {
      expected.insert(it->first);
    }
    for (const auto& row : rows) {
      char seq[16];
      std::snprintf(seq, sizeof seq, "%010llu", static_cast<unsigned long long>(row["seq"]));
      listed.insert(seq);
    }
    EXPECT_EQ(listed, expected) << "not the newest " << kKeep << " committed snapshots";
  }

  S3TestEnv env_;
  std::string prefix_;
  AgentTarget direct_;
  TempDir dir_;
};

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Every kind of fault, at a high rate, over several snapshot/restore trials
// until each kind has been injected at least once.
TEST_F(NetworkFaults, EveryFaultKindIsSurvivedAndRestoresByteIdentical) {
  const std::vector<std::string> kinds = MixedKinds(/*with_hang=*/false);
  ToolServer proxy(
      "fault_proxy.py",
      {"--upstream", Upstream(env_), "--config",
       ConfigJson({{"rate", 0.25}, {"seed", 7}, {"kinds", kinds}, {"stall_seconds", 1.0}})});
  const AgentTarget faulty = Through(proxy.endpoint());
  const int min_trials = LongReliabilityRun() ? 8 : 3, max_trials = LongReliabilityRun() ? 16 : 8;
  int trials = 0, committed = 0, restored = 0, lost = 0, retries = 0;
  int http_error_attempts = 0;
  nlohmann::json stats;
  auto all_kinds_seen = [&] {
    for (const std::string& k : kinds) {
      if (!stats.contains("faults") || !stats["faults"].contains(k)) return false;
    }
    return true;
  };
  std::map<std::string, std::map<std::string, FileDigest>> want;  // seq -> files
  while (trials < max_trials && (trials < min_trials || !all_kinds_seen())) {
    ++trials;
    const std::string ckpt = dir_.Join("ckpt" + std::to_string(trials));
    WriteNoisyWeights(ckpt + "/model.pt", 20, 100 + trials);
    dir_.WriteFile("ckpt" + std::to_string(trials) + "/trainer_state.json",
                   RandomBytes(3000, trials));
    auto snap = RunAgent(faulty, {"snapshot", "--dir", ckpt});
    retries += CountRetries(snap.err);
    http_error_attempts += CountHttpErrorAttempts(snap.err);
    ASSERT_EQ(snap.exit_code, 0) << snap.err;
    const std::string seq = Trimmed(snap.out);
    ++committed;
    want[seq] = DigestTree(ckpt);

    const std::string back = dir_.Join("back" + std::to_string(trials));
    auto restore = RunAgent(faulty, {"restore", "--snapshot", seq, "--to", back});
    retries += CountRetries(restore.err);
    http_error_attempts += CountHttpErrorAttempts(restore.err);
    ASSERT_EQ(restore.exit_code, 0) << restore.err;
    if (DigestTree(back) == want[seq]) {
      ++restored;
    } else {
      ++lost;
      ADD_FAILURE() << "snapshot " << seq << " restored different bytes";
    }
    std::filesystem::remove_all(ckpt);
    std::filesystem::remove_all(back);
    stats = ProxyStats(proxy);
  }
  for (const std::string& k : kinds) {
    EXPECT_TRUE(stats["faults"].contains(k))
        << "fault kind " << k << " never injected in " << trials << " trials";
  }
  // Each 500 and 503 is an HTTP answer the S3 client must have logged
  // (connection faults may also be resent inside libcurl, so they are not
  // counted against the log).
  EXPECT_GE(http_error_attempts, HttpErrorFaults(stats));

  // The store as the gateway sees it: the newest `keep` committed snapshots,
  // every checksum intact.
  const nlohmann::json rows = List();
  ExpectNewestKept(rows, want);
  for (const auto& row : rows) {
    char seq[16];
    std::snprintf(seq, sizeof seq, "%010llu", static_cast<unsigned long long>(row["seq"]));
    auto verify = RunAgent(direct_, {"verify", "--snapshot", seq});
    EXPECT_EQ(verify.exit_code, 0) << verify.err;
    EXPECT_NE(verify.out.find("every checksum matches"), std::string::npos) << verify.out;
  }
  std::printf("fault proxy: %ld requests, faults %s; agent retries logged: %d\n",
              stats.value("requests", 0L), FaultSummary(stats["faults"]).c_str(), retries);
  WriteReliabilityRecord({"net_every_fault_kind", "network",
                          "fault proxy at 25% of requests: " + FaultSummary(stats["faults"]),
                          trials, stats.value("injected", 0L), committed, restored, lost,
                          std::to_string(stats.value("requests", 0L)) + " requests; " +
                              std::to_string(retries) + " S3 retries logged by the agent"});
}

// 200 MiB through 5% faults of mixed kinds: commit, restore byte-identical.
// A trial is about 45 requests, so 2 or 3 faults; three trials (deleted one
// after the other, so the shared gateway holds one at a time) see most kinds.
TEST_F(NetworkFaults, A200MiBSnapshotCommitsAndRestoresThroughFivePercentFaults) {
  const bool long_run = LongReliabilityRun();
  const std::vector<std::string> kinds = MixedKinds(/*with_hang=*/long_run);
  const int trials_wanted = long_run ? 6 : 3;
  const size_t mib = long_run ? 400 : 200;
  ToolServer proxy(
      "fault_proxy.py",
      {"--upstream", Upstream(env_), "--config",
       ConfigJson({{"rate", 0.05}, {"seed", 2026}, {"kinds", kinds}, {"stall_seconds", 3.0}})});
  const AgentTarget faulty = Through(proxy.endpoint());
  int committed = 0, restored = 0, lost = 0, snap_retries = 0, restore_retries = 0;
  int http_error_attempts = 0;
  long upload_faults = 0, restore_faults = 0;
  for (int trial = 1; trial <= trials_wanted; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const std::string ckpt = dir_.Join("ckpt");
    // Two files: a big "model" and an "optimizer" a quarter of it.
    const size_t model_mib = mib * 4 / 5;
    WriteNoisyWeights(ckpt + "/model.safetensors", model_mib, 1000 + trial);
    WriteNoisyWeights(ckpt + "/optimizer.pt", mib - model_mib, 2000 + trial);
    const auto want = DigestTree(ckpt);

    // Each phase starts a fresh schedule (a new seed), so a phase of 20
    // requests or more always gets at least one fault.
    proxy.Control("POST", "/_proxy/config", ConfigJson({{"seed", 1000 * trial + 1}}));
    const long before = ProxyStats(proxy).value("injected", 0L);
    auto snap = RunAgent(faulty, {"snapshot", "--dir", ckpt}, std::chrono::seconds(1200));
    snap_retries += CountRetries(snap.err);
    http_error_attempts += CountHttpErrorAttempts(snap.err);
    ASSERT_EQ(snap.exit_code, 0) << snap.err;
    ++committed;
    const std::string seq = Trimmed(snap.out);
    const long after_upload = ProxyStats(proxy).value("injected", 0L);
    upload_faults += after_upload - before;
    std::filesystem::remove_all(ckpt);

    const std::string back = dir_.Join("back");
    proxy.Control("POST", "/_proxy/config", ConfigJson({{"seed", 1000 * trial + 2}}));
    auto restore =
        RunAgent(faulty, {"restore", "--snapshot", seq, "--to", back}, std::chrono::seconds(1200));
    restore_retries += CountRetries(restore.err);
    http_error_attempts += CountHttpErrorAttempts(restore.err);
    ASSERT_EQ(restore.exit_code, 0) << restore.err;
    restore_faults += ProxyStats(proxy).value("injected", 0L) - after_upload;
    if (DigestTree(back) == want) {
      ++restored;
    } else {
      ++lost;
      ADD_FAILURE() << "restore differs from the checkpoint";
    }
    std::filesystem::remove_all(back);

    // The store as the gateway sees it: this snapshot alone, whole, intact.
    const nlohmann::json rows = List();
    ASSERT_EQ(rows.size(), 1u) << rows.dump();
    EXPECT_EQ(rows[0]["size"].get<uint64_t>(), static_cast<uint64_t>(mib) << 20);
    // Real data: stored compressed, but not to nothing.
    EXPECT_GT(rows[0]["stored_size"].get<uint64_t>(), (static_cast<uint64_t>(mib) << 20) / 2);
    auto verify = RunAgent(direct_, {"verify", "--snapshot", seq}, std::chrono::seconds(600));
    EXPECT_EQ(verify.exit_code, 0) << verify.err;
    EXPECT_NE(verify.out.find("every checksum matches"), std::string::npos) << verify.out;
    DeletePrefix(env_, prefix_);
  }
  const nlohmann::json stats = ProxyStats(proxy);
  const long requests = stats.value("requests", 0L), injected = stats.value("injected", 0L);
  // The proxy really injected 5%: one in each window of 20 requests, give or
  // take the unfinished window of each phase.
  EXPECT_NEAR(static_cast<double>(injected), requests / 20.0, 2.0 * trials_wanted);
  EXPECT_GT(upload_faults, 0) << "no fault hit an upload";
  EXPECT_GT(restore_faults, 0) << "no fault hit a restore";
  EXPECT_GE(http_error_attempts, HttpErrorFaults(stats));
  std::printf(
      "%zu MiB x %d: %ld requests through the proxy, %ld faults (%s; %ld in uploads, %ld in "
      "restores); retries logged: snapshot %d, restore %d\n",
      mib, trials_wanted, requests, injected, FaultSummary(stats["faults"]).c_str(), upload_faults,
      restore_faults, snap_retries, restore_retries);
  WriteReliabilityRecord(
      {"net_200mib_5pct_faults", "network",
       "fault proxy at 5% of requests, mixed kinds: " + FaultSummary(stats["faults"]),
       trials_wanted, injected, committed, restored, lost,
       std::to_string(mib) + " MiB per trial; " + std::to_string(requests) + " requests, " +
           std::to_string(upload_faults) + " faults in uploads, " + std::to_string(restore_faults) +
           " in restores; S3 retries logged: snapshot " + std::to_string(snap_retries) +
           ", restore " + std::to_string(restore_retries)});
}

// The answers to the writes that commit a snapshot (CompleteMultipartUpload,
// the manifest, the "latest" pointer) are lost after the gateway carried them
// out: the agent must not take its own earlier write for a conflict, nor
// commit twice or leave a half-committed snapshot.
TEST_F(NetworkFaults, LostAnswersToCommitWritesNeitherFailNorDoubleCommit) {
  ToolServer proxy("fault_proxy.py",
                   {"--upstream", Upstream(env_), "--config",
                    ConfigJson({{"rate", 0.5},
                                {"seed", 11},
                                {"kinds", {"lost_response"}},
                                {"match", "^(POST .*uploadId=|PUT .*(manifest|latest))"}})});
  const AgentTarget faulty = Through(proxy.endpoint());
  const int trials = LongReliabilityRun() ? 8 : 3;
  int committed = 0, restored = 0, lost = 0, retries = 0;
  std::map<std::string, std::map<std::string, FileDigest>> want;
  for (int trial = 1; trial <= trials; ++trial) {
    const std::string ckpt = dir_.Join("ckpt" + std::to_string(trial));
    WriteNoisyWeights(ckpt + "/model.pt", 12, 600 + trial);
    dir_.WriteFile("ckpt" + std::to_string(trial) + "/meta.json", RandomBytes(500, trial));
    auto snap = RunAgent(faulty, {"snapshot", "--dir", ckpt});
    retries += CountRetries(snap.err);
    ASSERT_EQ(snap.exit_code, 0) << snap.err;
    ++committed;
    const std::string seq = Trimmed(snap.out);
    want[seq] = DigestTree(ckpt);
    auto restore = RunAgent(direct_, {"restore", "--snapshot", seq, "--to", dir_.Join("b" + seq)});
    ASSERT_EQ(restore.exit_code, 0) << restore.err;
    if (DigestTree(dir_.Join("b" + seq)) == want[seq]) {
      ++restored;
    } else {
      ++lost;
      ADD_FAILURE() << "snapshot " << seq << " restored different bytes";
    }
  }
  const nlohmann::json stats = ProxyStats(proxy);
  const long injected = stats.value("injected", 0L);
  EXPECT_GE(injected, trials) << stats.dump();
  ExpectNewestKept(List(), want);
  auto latest = RunAgent(direct_, {"restore", "--to", dir_.Join("latest")});
  ASSERT_EQ(latest.exit_code, 0) << latest.err;
  EXPECT_EQ(DigestTree(dir_.Join("latest")), want.rbegin()->second)
      << "the newest snapshot is not the one restored by default";
  WriteReliabilityRecord({"net_lost_commit_answers", "network",
                          "answers lost (reset after the gateway acted) on half the "
                          "CompleteMultipartUpload, manifest and latest writes",
                          trials, injected, committed, restored, lost,
                          std::to_string(retries) + " S3 retries logged"});
}

// A response that never comes: the client's stall timeout (under 1 KiB/s for
// 60 s) must turn the hang into a retry instead of waiting forever.
TEST_F(NetworkFaults, AHungRequestBecomesARetry) {
  ToolServer proxy("fault_proxy.py", {"--upstream", Upstream(env_), "--config",
                                      ConfigJson({{"rate", 1.0},
                                                  {"kinds", {"hang"}},
                                                  {"match", "^PUT .*partNumber=2&"},
                                                  {"max_faults", 1},
                                                  {"hang_seconds", 240}})});
  const std::string ckpt = dir_.Join("ckpt");
  WriteNoisyWeights(ckpt + "/model.pt", 24, 5);
  const auto want = DigestTree(ckpt);
  auto snap = RunAgent(Through(proxy.endpoint()), {"snapshot", "--dir", ckpt});
  const nlohmann::json stats = ProxyStats(proxy);
  EXPECT_EQ(stats["faults"].value("hang", 0L), 1) << stats.dump();
  // The client gave up on the silent connection; the proxy did not end it.
  EXPECT_EQ(stats.value("hangs_ended_by_client", 0L), 1) << stats.dump();
  ASSERT_EQ(snap.exit_code, 0) << snap.err;
  EXPECT_NE(snap.err.find("UploadPart"), std::string::npos) << snap.err;
  EXPECT_GE(CountOccurrences(snap.err, "transient network error on attempt"), 1) << snap.err;
  const std::string seq = Trimmed(snap.out);
  auto restore = RunAgent(direct_, {"restore", "--snapshot", seq, "--to", dir_.Join("back")});
  ASSERT_EQ(restore.exit_code, 0) << restore.err;
  const bool same = DigestTree(dir_.Join("back")) == want;
  EXPECT_TRUE(same);
  WriteReliabilityRecord({"net_hung_response", "network",
                          "one UploadPart never answered (connection held open, silent)", 1, 1, 1,
                          same ? 1 : 0, same ? 0 : 1,
                          std::to_string(CountRetries(snap.err)) +
                              " S3 retries logged; the 60 s stall timeout ended the hang"});
}

// Parts that never get through: the snapshot fails, and nothing of it is
// committed; the previous snapshot stays the newest and restores intact.
TEST_F(NetworkFaults, AnUploadThatCannotFinishCommitsNothing) {
  const std::string ckpt = dir_.Join("ckpt");
  WriteNoisyWeights(ckpt + "/model.pt", 12, 77);
  const auto good = DigestTree(ckpt);
  auto first = RunAgent(direct_, {"snapshot", "--dir", ckpt});
  ASSERT_EQ(first.exit_code, 0) << first.err;

  ToolServer proxy("fault_proxy.py", {"--upstream", Upstream(env_), "--config",
                                      ConfigJson({{"rate", 1.0},
                                                  {"kinds", {"error500", "cut_request", "reset"}},
                                                  {"match", "^PUT .*partNumber="}})});
  WriteNoisyWeights(ckpt + "/model.pt", 12, 78);
  auto failed = RunAgent(Through(proxy.endpoint()), {"snapshot", "--dir", ckpt});
  EXPECT_EQ(failed.exit_code, 1) << failed.err;
  const long injected = ProxyStats(proxy).value("injected", 0L);
  EXPECT_GE(injected, 8) << "every attempt of a part should have been faulted";

  const nlohmann::json rows = List();
  ASSERT_EQ(rows.size(), 1u) << rows.dump();
  EXPECT_EQ(rows[0]["seq"], 1);
  auto restore = RunAgent(direct_, {"restore", "--to", dir_.Join("back")});
  ASSERT_EQ(restore.exit_code, 0) << restore.err;
  const bool same = DigestTree(dir_.Join("back")) == good;
  EXPECT_TRUE(same) << "the older snapshot must restore unchanged";
  // No multipart upload of the failed snapshot is left open.
  auto store = OpenTestS3Store(env_, "");
  ASSERT_TRUE(store);
  auto uploads = store->client().ListMultipartUploads(env_.bucket, prefix_ + "/");
  ASSERT_TRUE(uploads.ok()) << uploads.status().ToString();
  EXPECT_TRUE(uploads->empty()) << uploads->size() << " multipart uploads left open";
  WriteReliabilityRecord({"net_upload_never_finishes", "network",
                          "every UploadPart answered 500, cut short or reset", 1, injected, 1,
                          same ? 1 : 0, same ? 0 : 1,
                          "committed/restored count the earlier snapshot, which stays the "
                          "only one listed and restores unchanged; the failed snapshot exited 1 "
                          "and left no committed snapshot and no open multipart upload; " +
                              std::to_string(CountRetries(failed.err)) + " S3 retries logged"});
}

// ---------------------------------------------------------------------------
// Packet loss and queueing on a link, in a network namespace made here.

std::string Sh(const std::string& cmd, int* rc = nullptr) {
  auto r = RunCommand({"sh", "-c", cmd + " 2>&1"}, {}, std::chrono::seconds(60));
  if (rc) *rc = r.exit_code;
  return r.out;
}

// A namespace with a veth pair to the root one, removed on destruction.
class Netns {
 public:
  Netns() {
    const std::string id = RandomSuffix().substr(0, 6);
    name_ = "sgrn-" + id;
    host_if_ = "sgrn" + id + "a";
    ns_if_ = "sgrn" + id + "b";
    const int octet = 1 + static_cast<int>(std::stoul(id.substr(0, 2), nullptr, 16) % 250);
    host_ip_ = "10.231." + std::to_string(octet) + ".1";
    ns_ip_ = "10.231." + std::to_string(octet) + ".2";
    int rc = 0;
    log_ += Sh("ip netns add " + name_, &rc);
    if (rc != 0) return;
    created_ = true;
    const std::string exec = "ip netns exec " + name_ + " ";
    log_ += Sh("set -e; ip link add " + host_if_ + " type veth peer name " + ns_if_ +
                   "; ip link set " + ns_if_ + " netns " + name_ + "; ip addr add " + host_ip_ +
                   "/30 dev " + host_if_ + "; ip link set " + host_if_ + " up; " + exec +
                   "ip addr add " + ns_ip_ + "/30 dev " + ns_if_ + "; " + exec + "ip link set " +
                   ns_if_ + " up; " + exec + "ip link set lo up",
               &rc);
    ok_ = rc == 0;
  }
  ~Netns() {
    if (created_) Sh("ip netns del " + name_);
    Sh("ip link del " + host_if_);
  }
  bool ok() const { return ok_; }
  const std::string& log() const { return log_; }
  std::string Exec(const std::string& cmd, int* rc) {
    return Sh("ip netns exec " + name_ + " " + cmd, rc);
  }
  std::vector<std::string> Wrapper() const { return {"ip", "netns", "exec", name_}; }
  const std::string& name() const { return name_; }
  const std::string& ns_if() const { return ns_if_; }
  const std::string& host_ip() const { return host_ip_; }

 private:
  std::string name_, host_if_, ns_if_, host_ip_, ns_ip_, log_;
  bool created_ = false, ok_ = false;
};

// Packets the namespace's iptables DROP rules have dropped so far.
long DroppedPackets(Netns& ns) {
  int rc = 0;
  const std::string out = ns.Exec("iptables -L -v -n -x", &rc);
  long total = 0;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("DROP") == std::string::npos || line.find("statistic") == std::string::npos) {
      continue;
    }
    total += std::stol(line.substr(line.find_first_not_of(' ')));
  }
  return total;
}

TEST_F(NetworkFaults, PacketLossAndQueueingInANetworkNamespace) {
  ASSERT_EQ(::geteuid(), 0u) << "this test makes a network namespace and needs root (CI runs "
                                "as root); run it as root";
  Netns ns;
  ASSERT_TRUE(ns.ok()) << "cannot make a network namespace with a veth pair: " << ns.log();
  // The gateway listens on the root namespace's loopback only: a fault-free
  // proxy on the veth address forwards to it.
  ToolServer relay("fault_proxy.py",
                   {"--upstream", Upstream(env_), "--host", ns.host_ip(), "--config", "{}"});
  const std::string port = relay.endpoint().substr(relay.endpoint().rfind(':') + 1);
  ASSERT_FALSE(port.empty());

  // Loss and delay with netem when the kernel has it; else iptables'
  // statistic match drops packets at random and tbf queues them.
  const int loss_pct = LongReliabilityRun() ? 10 : 5;
  int rc = 0;
  std::string how;
  const std::string netem_out = ns.Exec("tc qdisc add dev " + ns.ns_if() + " root netem loss " +
                                            std::to_string(loss_pct) + "% delay 5ms",
                                        &rc);
  const bool netem = rc == 0;
  if (netem) {
    how = "tc netem loss " + std::to_string(loss_pct) + "% delay 5ms on the namespace's veth";
  } else {
    const std::string p = loss_pct == 5 ? "0.05" : "0.10";
    std::string out = ns.Exec("iptables -A INPUT -i " + ns.ns_if() +
                                  " -m statistic --mode random --probability " + p + " -j DROP",
                              &rc);
    ASSERT_EQ(rc, 0) << "iptables statistic match unavailable: " << out;
    out = ns.Exec("iptables -A OUTPUT -o " + ns.ns_if() +
                      " -m statistic --mode random --probability " + p + " -j DROP",
                  &rc);
    ASSERT_EQ(rc, 0) << out;
    out = ns.Exec(
        "tc qdisc add dev " + ns.ns_if() + " root tbf rate 200mbit burst 64kb latency 50ms", &rc);
    ASSERT_EQ(rc, 0) << "tbf unavailable: " << out;
    how = "no netem in this kernel (" + Trimmed(netem_out) + "): iptables statistic DROP of " +
          std::to_string(loss_pct) + "% of packets each way + tbf 200 Mbit/s, 50 ms queue";
  }
  std::printf("network namespace %s: %s\n", ns.name().c_str(), how.c_str());

  AgentTarget inside = Through("http://" + ns.host_ip() + ":" + port);
  inside.wrapper = ns.Wrapper();
  const int trials = LongReliabilityRun() ? 3 : 1;
  const size_t mib = LongReliabilityRun() ? 200 : 64;
  int committed = 0, restored = 0, lost = 0, retries = 0;
  for (int trial = 1; trial <= trials; ++trial) {
    const std::string ckpt = dir_.Join("ckpt");
    WriteNoisyWeights(ckpt + "/model.pt", mib, 300 + trial);
    const auto want = DigestTree(ckpt);
    auto snap = RunAgent(inside, {"snapshot", "--dir", ckpt}, std::chrono::seconds(900));
    retries += CountRetries(snap.err);
    ASSERT_EQ(snap.exit_code, 0) << snap.err;
    ++committed;
    const std::string seq = Trimmed(snap.out);
    const std::string back = dir_.Join("back");
    auto restore =
        RunAgent(inside, {"restore", "--snapshot", seq, "--to", back}, std::chrono::seconds(900));
    retries += CountRetries(restore.err);
    ASSERT_EQ(restore.exit_code, 0) << restore.err;
    if (DigestTree(back) == want) {
      ++restored;
    } else {
      ++lost;
      ADD_FAILURE() << "restore differs";
    }
    std::filesystem::remove_all(back);
    std::filesystem::remove_all(ckpt);
  }
  const long dropped = netem ? 0 : DroppedPackets(ns);
  if (!netem) {
    EXPECT_GT(dropped, 0) << "the DROP rules dropped nothing";
  }
  EXPECT_EQ(List().size(), std::min(static_cast<size_t>(trials), kKeep));
  std::printf("%d trial(s) of %zu MiB: %ld packets dropped, %d S3 retries logged\n", trials, mib,
              dropped, retries);
  WriteReliabilityRecord({"net_netns_loss", "network", how, trials, dropped, committed, restored,
                          lost,
                          std::to_string(mib) + " MiB per trial through a veth pair; " +
                              (netem ? std::string("netem counts no drops")
                                     : std::to_string(dropped) + " packets dropped by iptables") +
                              "; " + std::to_string(retries) + " S3 retries logged"});
}

}  // namespace
}  // namespace sg::testing
