#include "tests/support/agent_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "common/files.h"

extern char** environ;

namespace sg::testing {

AgentProcess::AgentProcess(const std::vector<std::string>& args,
                           const std::map<std::string, std::string>& env,
                           const std::string& log_path, const std::vector<std::string>& wrapper)
    : log_path_(log_path) {
  SpawnOptions spawn;
  spawn.argv = wrapper;
  spawn.argv.push_back(SPOTGUARD_BIN);
  spawn.argv.insert(spawn.argv.end(), args.begin(), args.end());
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) spawn.env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : env) {
    if (v.empty()) {
      spawn.env.erase(k);
    } else {
      spawn.env[k] = v;
    }
  }
  auto out = OpenFile(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!out.ok()) {
    ADD_FAILURE() << out.status().ToString();
    return;
  }
  spawn.stdout_fd = out->get();
  spawn.stderr_fd = out->get();
  auto child = ChildProcess::Spawn(spawn);
  if (!child.ok()) {
    ADD_FAILURE() << child.status().ToString();
    return;
  }
  child_.emplace(std::move(*child));
}

std::optional<int> AgentProcess::Wait(std::chrono::milliseconds timeout) {
  if (!child_) return std::nullopt;
  auto r = child_->Wait(timeout);
  if (!r.ok() || !r->has_value()) return std::nullopt;
  return (*r)->ShellCode();
}

std::string AgentProcess::Output() const {
  auto text = ReadFileToString(log_path_);
  return text.ok() ? *text : "";
}

bool AgentProcess::WaitForOutput(const std::string& text, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (Output().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Output().find(text) != std::string::npos;  // also with a timeout of 0
}

}  // namespace sg::testing
