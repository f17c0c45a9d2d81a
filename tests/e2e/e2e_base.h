// The ground every end-to-end fixture stands on (docs/testing.md,
// "End-to-end fixtures"): the test's directory, the store its agents use
// (the Ceph gateway under a prefix of the test's own, or a file:// store in
// its directory), the config keys every e2e job shares and the environment
// every agent and CLI run of the test gets.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/file_store.h"
#include "common/files.h"
#include "common/object_store.h"
#include "common/s3_store.h"
#include "tests/support/s3_test_env.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"

namespace sg::testing {

using namespace std::chrono_literals;

class E2EBase : public ::testing::Test {
 protected:
  // The store, opened by the fixture's SetUp: the gateway under
  // "<area>/<random>" (the test fails, not skips, without one)...
  void UseS3(const std::string& area) {
    ASSERT_TRUE(LoadS3TestEnv(&s3_));
    prefix_ = area + "/" + RandomHex(6);
    std::unique_ptr<S3Store> s3 = OpenTestS3Store(s3_, prefix_);
    ASSERT_NE(s3, nullptr);
    s3_store_ = s3.get();
    store_ = std::move(s3);
    store_url_ = "s3://" + s3_.bucket + "/" + prefix_;
    on_s3_ = true;
  }
  // ...or a file:// store in the test's directory.
  void UseFileStore() {
    auto opened = FileStore::Open(dir_.Join("store"));
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(*opened);
    store_url_ = "file://" + dir_.Join("store");
  }

  // The keys every e2e job shares: job "job" on the test's store, a 300 ms
  // settle time, an upload a second, SIGUSR1 as the checkpoint signal, the
  // metadata service read every 200 ms, a lease beating every second with a
  // 3 s timeout. Fixtures add the trainer and their own keys.
  nlohmann::json BaseConfig() const {
    nlohmann::json c = {{"job", "job"},
                        {"store", store_url_},
                        {"checkpoint_signal", "SIGUSR1"},
                        {"settle_time", "300ms"},
                        {"upload_interval", "1s"},
                        {"imds", {{"poll_interval", "200ms"}}},
                        {"lease", {{"heartbeat", "1s"}, {"timeout", "3s"}}}};
    if (on_s3_) c["endpoint"] = s3_.endpoint;
    return c;
  }
  // Writes `c`, with the keys of `overrides` replacing its own, as
  // <name>.json in the test's directory; its path.
  std::string WriteJobConfig(const std::string& name, nlohmann::json c,
                             const nlohmann::json& overrides = nlohmann::json::object()) {
    for (const auto& [k, v] : overrides.items()) c[k] = v;
    return dir_.WriteFile(name + ".json", c.dump(2));
  }

  // The environment of an agent or a CLI run of the test: the gateway's keys
  // (on S3), no config file, debug logs, no systemd socket inherited from
  // whatever runs the tests; `extra` on top.
  std::map<std::string, std::string> AgentEnv(
      const std::map<std::string, std::string>& extra = {}) const {
    std::map<std::string, std::string> env = {{"SPOTGUARD_CONFIG", ""},
                                              {"SPOTGUARD_LOG_LEVEL", "debug"},
                                              {"NOTIFY_SOCKET", ""},
                                              {"WATCHDOG_USEC", ""},
                                              {"WATCHDOG_PID", ""}};
    if (on_s3_) {
      env["AWS_ACCESS_KEY_ID"] = s3_.access_key;
      env["AWS_SECRET_ACCESS_KEY"] = s3_.secret_key;
    }
    for (const auto& [k, v] : extra) env[k] = v;
    return env;
  }

  // The wrapper that makes a process PID 1 of a PID namespace of its own, as
  // a container's entrypoint is; it dies with the test (--kill-child).
  // Without root, a user namespace maps it.
  static std::vector<std::string> AsPid1() {
    std::vector<std::string> w = {"unshare", "--pid", "--fork", "--mount-proc", "--kill-child"};
    if (::geteuid() != 0) w.insert(w.begin() + 1, {"--user", "--map-root-user"});
    return w;
  }

  bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
    return WaitUntil(done, timeout);
  }

  TempDir dir_;
  S3TestEnv s3_;          // on S3
  std::string prefix_;    // on S3: the test's prefix in the bucket
  std::string store_url_;
  std::unique_ptr<ObjectStore> store_;
  S3Store* s3_store_ = nullptr;  // on S3: store_, for what only S3 has
  bool on_s3_ = false;
};

}  // namespace sg::testing
