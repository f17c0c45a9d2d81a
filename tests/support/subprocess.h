// Real child processes for tests: run a command to completion and capture
// what it printed, or keep a server running for the duration of a test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sg::testing {

struct CommandResult {
  int exit_code = -1;  // 128 + signal when killed
  std::string out;
  std::string err;
};

// Runs argv[0] (searched in PATH when it has no '/') with the current
// environment plus `env` (an empty value removes a variable). Fails the
// calling test with a message when it cannot start or does not finish in time.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {},
                         std::chrono::seconds timeout = std::chrono::seconds(60));

// A background process, stopped with SIGTERM (then SIGKILL) on destruction.
class BackgroundProcess {
 public:
  explicit BackgroundProcess(const std::vector<std::string>& argv);
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running();

 private:
  pid_t pid_ = -1;
};

// The IMDS simulator (tests/tools/imds_sim.py) on an ephemeral loopback port.
class ImdsSimulator {
 public:
  explicit ImdsSimulator(const std::vector<std::string>& extra_args = {});
  const std::string& endpoint() const { return endpoint_; }
  // POST/GET/DELETE on a control path such as "/_sim/spot-notice"; returns the body.
  std::string Control(const std::string& method, const std::string& path,
                      const std::string& body = "");

 private:
  std::optional<BackgroundProcess> process_;
  std::string endpoint_;
};

// A test server from tests/tools/ (a Python script taking `--port 0
// --port-file FILE`) on an ephemeral loopback port, stopped on destruction.
class ToolServer {
 public:
  // `script` is relative to tests/tools/, e.g. "autoscaling_sim.py".
  explicit ToolServer(const std::string& script, const std::vector<std::string>& extra_args = {});
  const std::string& endpoint() const { return endpoint_; }
  // A request to a control path such as "/_sim/calls"; returns the body and
  // fails the test unless the answer is 200.
  std::string Control(const std::string& method, const std::string& path,
                      const std::string& body = "");

 private:
  std::optional<BackgroundProcess> process_;
  std::string endpoint_;
};

}  // namespace sg::testing
