// The fixture of the tests that hold a group node's agent to what one node's
// agent does (docs/design.md §14, "Like one node"): agents of the real binary,
// each with its own IMDS simulator (own instance id), sharing a file:// store;
// optionally under a systemd notify socket the test binds (NotifySocket), or
// as PID 1 of a PID namespace of its own.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
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

#include "tests/e2e/group_e2e_base.h"
#include "common/files.h"
#include "tests/support/agent_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

namespace sg::testing {

using namespace std::chrono_literals;

// systemd's end of sd_notify(3): a datagram socket bound at `path`; every
// message is kept with the time the kernel queued it (SO_TIMESTAMP), so a
// reader thread that a loaded machine holds back cannot stretch a gap.
class NotifySocket {
 public:
  struct Message {
    std::chrono::system_clock::time_point at;
    std::string text;
  };

  explicit NotifySocket(std::string path) : path_(std::move(path)) {
    fd_ = UniqueFd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path_.data(), std::min(path_.size(), sizeof addr.sun_path - 1));
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
        << path_ << ": " << std::strerror(errno);
    const int on = 1;
    EXPECT_EQ(::setsockopt(fd_.get(), SOL_SOCKET, SO_TIMESTAMP, &on, sizeof on), 0)
        << std::strerror(errno);
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
  std::optional<std::chrono::system_clock::time_point> First(const std::string& text) const {
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
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timeval))];
      iovec iov{buf, sizeof buf};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      const ssize_t n = ::recvmsg(fd_.get(), &msg, MSG_DONTWAIT);
      if (n <= 0) continue;
      auto at = std::chrono::system_clock::now();
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMP) continue;
        timeval tv{};
        std::memcpy(&tv, CMSG_DATA(c), sizeof tv);
        at = std::chrono::system_clock::time_point(std::chrono::seconds(tv.tv_sec) +
                                                   std::chrono::microseconds(tv.tv_usec));
      }
      std::lock_guard<std::mutex> lock(mu_);
      got_.push_back({at, std::string(buf, static_cast<size_t>(n))});
    }
  }

  const std::string path_;
  UniqueFd fd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<Message> got_;
};

class GroupNodeE2E : public GroupE2EBase {
 protected:
  void SetUp() override { UseFileStore(); }

  // A job of `nodes` nodes whose trainer is `command`; `overrides` replace keys.
  std::string JobConfig(int nodes, const nlohmann::json& command,
                        const nlohmann::json& overrides = nlohmann::json::object()) {
    nlohmann::json c = GroupJobConfig(nodes, command);
    c["preset"] = "generic";
    c["patterns"] = {"step_*.pt", "step_*.ckpt"};
    return WriteNumberedConfig(c, overrides);
  }

  // tests/tools/group_trainer.py, running until stopped.
  static nlohmann::json GroupTrainer() {
    return {SPOTGUARD_PYTHON, std::string(SPOTGUARD_SOURCE_DIR) + "/tests/tools/group_trainer.py",
            "--steps", "1000000", "--step-seconds", "0.2"};
  }
};

}  // namespace sg::testing
