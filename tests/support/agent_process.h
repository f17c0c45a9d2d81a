// The spotguard binary running in the background, as systemd or user-data
// would run it: its output collected in a file, its exit code awaited.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/process.h"

namespace sg::testing {

class AgentProcess {
 public:
  // Starts SPOTGUARD_BIN with `args` and the test's environment plus `env`
  // (an empty value removes a variable).
  // `wrapper` (say, `unshare --pid --fork`) runs SPOTGUARD_BIN when given.
  AgentProcess(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
               const std::string& log_path, const std::vector<std::string>& wrapper = {});
  // Exit code (128 + signal when killed), or nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  std::string Output() const;
  pid_t pid() const { return child_ ? child_->pid() : -1; }
  bool WaitForOutput(const std::string& text, std::chrono::milliseconds timeout) const;

 private:
  std::string log_path_;
  std::optional<ChildProcess> child_;
};

}  // namespace sg::testing
