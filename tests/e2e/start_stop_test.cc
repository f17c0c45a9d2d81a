// The edges of a run as engines see them: a stop before the trainer starts,
// a store down at start, a last checkpoint that cannot be stored.
//
// A stop before the trainer starts (docs/design.md §9, "The start"): SIGTERM
// or an interruption notice while the snapshot is being restored cancels the
// restore, leaves the checkpoint dir as it was, releases the lease and exits
// 75 before stop_timeout. The spotguard binary, the Ceph gateway behind a
// fault proxy that holds the answer of one ranged read, and the IMDS
// simulator. The proxy holds that answer for minutes, so the restore cannot
// end before the stop: the verdict does not depend on the machine's speed.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "agent/repo/lease.h"
#include "tests/e2e/agent_e2e_fixture.h"
#include "tests/support/random_bytes.h"

namespace sg::testing {
namespace {

class StopDuringRestoreE2E : public AgentE2E {
 protected:
  void SetUp() override {
    AgentE2E::SetUp();
    proxy_ = std::make_unique<ToolServer>(
        "fault_proxy.py", std::vector<std::string>{"--upstream", ProxyUpstream(s3_.endpoint)});
    ASSERT_FALSE(proxy_->endpoint().empty());
  }
  void TearDown() override {
    if (proxy_) proxy_->Control("POST", "/_proxy/continue");
  }

  std::map<std::string, std::string> AwsEnv() {
    return {{"AWS_ACCESS_KEY_ID", s3_.access_key},
            {"AWS_SECRET_ACCESS_KEY", s3_.secret_key},
            {"SPOTGUARD_CONFIG", ""},
            {"AWS_EC2_METADATA_DISABLED", "true"}};
  }

  // A snapshot of 24 MiB of random bytes (several ranged reads), taken
  // straight to the gateway; then the proxy is told to hold the answer of
  // the first ranged read of its files, and the agent is started through
  // the proxy with a checkpoint dir that holds a file of its own.
  std::unique_ptr<AgentProcess> StartRestoringAgent() {
    const std::string src = dir_.Join("src");
    EXPECT_TRUE(MakeDirs(src).ok());
    EXPECT_TRUE(WriteFileAtomic(src + "/step_100.ckpt", RandomBytes(24u << 20, 7)).ok());
    const std::string direct = WriteConfig("direct", {});
    auto snap = RunCommand({SPOTGUARD_BIN, "snapshot", "-c", direct, "--dir", src}, AwsEnv());
    EXPECT_EQ(snap.exit_code, 0) << snap.err;
    EXPECT_EQ(Committed().size(), 1u);

    EXPECT_TRUE(MakeDirs(dir_.Join("ckpt")).ok());
    EXPECT_TRUE(WriteFileAtomic(dir_.Join("ckpt/notes.txt"), "mine\n").ok());
    proxy_->Control("POST", "/_proxy/config",
                    R"({"pause_match": "GET [^ ]*/snapshots/[0-9]+/files/", "pause_seconds": 600})");
    const std::string config = WriteConfig(
        "a", {"--steps", "100000"}, {{"endpoint", proxy_->endpoint()}, {"stop_timeout", "20s"}});
    auto a = StartAgent("a", config, "ckpt", imds_);
    // The restore has started and one of its reads is held.
    EXPECT_TRUE(a->WaitForOutput("restoring snapshot", 60s)) << a->Output();
    EXPECT_TRUE(WaitFor(
        [&] {
          return nlohmann::json::parse(proxy_->Control("GET", "/_proxy/stats"))["paused"].get<bool>();
        },
        60s))
        << a->Output();
    return a;
  }

  // Exit 75 before stop_timeout, the checkpoint dir as it was, no temporary
  // dir left, the lease released.
  void ExpectStoppedCleanly(AgentProcess& a, std::chrono::steady_clock::time_point from) {
    const auto code = a.Wait(120s);
    const auto took = std::chrono::steady_clock::now() - from;
    ASSERT_TRUE(code.has_value()) << a.Output();
    EXPECT_EQ(*code, 75) << a.Output();
    EXPECT_LT(took, 20s) << "stop_timeout is 20 s\n" << a.Output();
    EXPECT_EQ(a.Output().find("started the trainer"), std::string::npos) << a.Output();
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_.Join("ckpt"))) {
      names.push_back(e.path().filename().string());
    }
    EXPECT_EQ(names, std::vector<std::string>{"notes.txt"});
    EXPECT_EQ(Contents(dir_.Join("ckpt/notes.txt")), "mine\n");
    for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
      const std::string name = e.path().filename().string();
      EXPECT_EQ(name.find("spotguard-restore"), std::string::npos) << name;
      EXPECT_EQ(name.find("spotguard-backup"), std::string::npos) << name;
    }
    auto lease = static_cast<ObjectStore&>(*store_).Get("job/lease");
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    auto state = LeaseKeeper::Parse(*lease);
    ASSERT_TRUE(state.ok());
    EXPECT_TRUE(state->released) << *lease;
    const auto kinds = EventKinds();
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), "stop"), kinds.end());
    EXPECT_EQ(std::find(kinds.begin(), kinds.end(), "restore"), kinds.end());
  }

  static std::string Contents(const std::string& path) {
    auto text = ReadFileToString(path);
    return text.ok() ? *text : "";
  }

  std::unique_ptr<ToolServer> proxy_;
};

TEST_F(StopDuringRestoreE2E, SigtermCancelsTheRestoreAndExits75BeforeTheStopTimeout) {
  auto a = StartRestoringAgent();
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(a->pid(), SIGTERM), 0);
  ExpectStoppedCleanly(*a, sent);
}

TEST_F(StopDuringRestoreE2E, ANoticeCancelsTheRestoreAndExits75) {
  auto a = StartRestoringAgent();
  const auto posted = std::chrono::steady_clock::now();
  imds_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 120})");
  ASSERT_TRUE(a->WaitForOutput("INTERRUPTION NOTICE before the trainer started", 30s))
      << a->Output();
  ExpectStoppedCleanly(*a, posted);
}

// A port of the loopback that nothing listens on (yet).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A store that refuses connections when the container starts (docs/agent.md,
// "What happens"): the agent tries again with backoff instead of exiting 1,
// and the job runs once the store answers. The store comes up only after
// the agent said it would try again, so no timing decides the verdict.
TEST_F(AgentE2E, AStoreThatRefusesConnectionsAtStartIsWaitedForAndTheJobRuns) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  const std::string config = WriteConfig(
      "a", {"--steps", "40"}, {{"endpoint", "http://127.0.0.1:" + std::to_string(port)}});
  auto a = StartAgent("a", config, "ckpt", imds_);
  ASSERT_TRUE(a->WaitForOutput("trying again in", 120s)) << a->Output();
  ToolServer store("fault_proxy.py", {"--upstream", ProxyUpstream(s3_.endpoint), "--port",
                                      std::to_string(port)});
  ASSERT_EQ(store.endpoint(), "http://127.0.0.1:" + std::to_string(port));
  const auto code = a->Wait(240s);
  ASSERT_TRUE(code.has_value()) << a->Output();
  EXPECT_EQ(*code, 0) << a->Output();
  EXPECT_FALSE(Committed().empty()) << a->Output();
}

// A trainer that finishes while the store refuses the snapshot's writes: the
// final upload is tried again, then the agent exits 74, which every engine
// retries (docs/fleet.md), never 1 (a failed trial on AWS Batch). No
// `complete` marker is written.
TEST_F(AgentE2E, AFinishedTrainerWhoseLastCheckpointCannotBeStoredExits74) {
  ToolServer proxy("fault_proxy.py", {"--upstream", ProxyUpstream(s3_.endpoint)});
  proxy.Control("POST", "/_proxy/config",
                R"({"match": "PUT [^ ]*/snapshots/", "rate": 1.0, "kinds": ["error500"]})");
  const std::string config = WriteConfig("a", {"--steps", "40"}, {{"endpoint", proxy.endpoint()}});
  auto a = StartAgent("a", config, "ckpt", imds_);
  const auto code = a->Wait(240s);
  ASSERT_TRUE(code.has_value()) << a->Output();
  EXPECT_EQ(*code, 74) << a->Output();
  EXPECT_NE(a->Output().find("trying the final snapshot again"), std::string::npos) << a->Output();
  EXPECT_TRUE(Committed().empty());
  EXPECT_TRUE(store_->Head("job/complete").status().Is(StatusCode::kNotFound));
}

}  // namespace
}  // namespace sg::testing
