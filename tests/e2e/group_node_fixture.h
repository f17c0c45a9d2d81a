// The fixture of the tests that hold a group node's agent to what one node's
// agent does (docs/design.md §14, "Like one node"): agents of the real binary,
// each with its own IMDS simulator (own instance id), sharing a file:// store;
// optionally under a systemd notify socket the test binds (NotifySocket), or
// as PID 1 of a PID namespace of its own.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent/repo/group_store.h"
#include "common/file_store.h"
#include "common/files.h"
#include "tests/support/agent_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

namespace sg::testing {

using namespace std::chrono_literals;

// systemd's end of sd_notify(3): a datagram socket bound at `path`; every
// message is kept with the time it arrived.
class NotifySocket {
 public:
  struct Message {
    std::chrono::steady_clock::time_point at;
    std::string text;
  };

  explicit NotifySocket(std::string path) : path_(std::move(path)) {
    fd_ = UniqueFd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path_.data(), std::min(path_.size(), sizeof addr.sun_path - 1));
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
        << path_ << ": " << std::strerror(errno);
    thread_ = std::thread([this] { Receive(); });
  }
  ~NotifySocket() {
    stop_ = true;
    thread_.join();
  }

  const std::string& path() const { return path_; }
  std::vector<Message> Messages() const {
    std::lock_guard<std::mutex> lock(mu_);
    return got_;
  }
  // When `text` first arrived, if it did.
  std::optional<std::chrono::steady_clock::time_point> First(const std::string& text) const {
    for (const Message& m : Messages()) {
      if (m.text == text) return m.at;
    }
    return std::nullopt;
  }
  bool WaitFor(const std::string& text, std::chrono::milliseconds timeout) const {
    return WaitUntil([&] { return First(text).has_value(); }, timeout);
  }

 private:
  void Receive() {
    while (!stop_) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n <= 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      got_.push_back({std::chrono::steady_clock::now(), std::string(buf, static_cast<size_t>(n))});
    }
  }

  const std::string path_;
  UniqueFd fd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<Message> got_;
};

class GroupNodeE2E : public ::testing::Test {
 protected:
  struct Node {
    std::unique_ptr<ImdsSimulator> imds;
    std::unique_ptr<AgentProcess> agent;
    std::string ckpt;
  };
  struct NodeOptions {
    std::map<std::string, std::string> env;
    bool pid1 = false;          // PID 1 of a PID namespace of its own
    bool create_ckpt = true;    // false: the checkpoint dir does not exist yet
  };

  void SetUp() override {
    auto store = FileStore::Open(dir_.Join("store"));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }

  // A job of `nodes` nodes whose trainer is `command`; `overrides` replace keys.
  std::string JobConfig(int nodes, const nlohmann::json& command,
                        const nlohmann::json& overrides = nlohmann::json::object()) {
    nlohmann::json c = {{"job", "job"},
                        {"store", "file://" + dir_.Join("store")},
                        {"preset", "generic"},
                        {"patterns", {"step_*.pt", "step_*.ckpt"}},
                        {"checkpoint_signal", "SIGUSR1"},
                        {"settle_time", "300ms"},
                        {"upload_interval", "1s"},
                        {"stop_grace", "5s"},
                        {"nodes", nodes},
                        {"imds", {{"poll_interval", "200ms"}}},
                        {"lease", {{"heartbeat", "1s"}, {"timeout", "6s"}}},
                        {"command", command}};
    if (nodes > 1) {
      c["group"] = {{"address", "127.0.0.1"}, {"heartbeat", "1s"}, {"timeout", "10s"}};
    }
    for (auto& [k, v] : overrides.items()) c[k] = v;
    return dir_.WriteFile("job-" + std::to_string(++configs_) + ".json", c.dump(2));
  }

  // tests/tools/group_trainer.py, running until stopped.
  static nlohmann::json GroupTrainer() {
    return {SPOTGUARD_PYTHON, std::string(SPOTGUARD_SOURCE_DIR) + "/tests/tools/group_trainer.py",
            "--steps", "1000000", "--step-seconds", "0.2"};
  }

  Node& StartNode(int n, const std::string& config) { return StartNode(n, config, NodeOptions()); }
  Node& StartNode(int n, const std::string& config, NodeOptions options) {
    Node& node = nodes_[n];
    node.imds = std::make_unique<ImdsSimulator>();
    node.imds->Control("POST", "/_sim/identity",
                       R"({"instanceId": "i-node)" + std::to_string(n) + R"("})");
    node.ckpt = dir_.Join("node" + std::to_string(n) + "/ckpt");
    if (options.create_ckpt) std::filesystem::create_directories(node.ckpt);
    std::map<std::string, std::string> env = {{"SPOTGUARD_CONFIG", ""},
                                              {"SPOTGUARD_LOG_LEVEL", "debug"},
                                              {"NOTIFY_SOCKET", ""},
                                              {"WATCHDOG_USEC", ""},
                                              {"WATCHDOG_PID", ""}};
    for (const auto& [k, v] : options.env) env[k] = v;
    std::vector<std::string> wrapper;
    if (options.pid1) {
      wrapper = {"unshare", "--pid", "--fork", "--mount-proc", "--kill-child"};
      if (::geteuid() != 0) wrapper.insert(wrapper.begin() + 1, {"--user", "--map-root-user"});
    }
    node.agent = std::make_unique<AgentProcess>(
        std::vector<std::string>{"run", "-c", config, "--checkpoint-dir", node.ckpt,
                                 "--imds-endpoint", node.imds->endpoint()},
        env, dir_.Join("node" + std::to_string(n) + ".log"), wrapper);
    return node;
  }

  void Notice(int n) {
    nodes_[n].imds->Control("POST", "/_sim/spot-notice",
                            R"({"action": "terminate", "in_seconds": 120})");
  }
  std::vector<GroupCommit> Groups() {
    auto g = GroupStore(*store_, "job").Groups();
    return g.ok() ? *g : std::vector<GroupCommit>{};
  }
  bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
    return WaitUntil(done, timeout);
  }
  std::string Logs() {
    std::string out;
    for (auto& [n, node] : nodes_) {
      if (node.agent) out += "--- node " + std::to_string(n) + "\n" + node.agent->Output();
    }
    return out;
  }

  TempDir dir_;
  std::unique_ptr<FileStore> store_;
  std::map<int, Node> nodes_;
  int configs_ = 0;
};

}  // namespace sg::testing
