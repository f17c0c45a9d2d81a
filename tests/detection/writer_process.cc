#include "tests/detection/writer_process.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace sg::testing {
namespace {

std::vector<std::string> WriterArgv(const std::string& script,
                                    const std::vector<std::string>& args) {
  std::vector<std::string> argv = {SPOTGUARD_PYTHON, "-B",
                                   SPOTGUARD_SOURCE_DIR "/tests/tools/writers/" + script};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

WriterProcess::WriterProcess(const std::string& script, const std::vector<std::string>& args,
                             const std::vector<std::string>& holds)
    : script_(script) {
  std::vector<std::string> argv = WriterArgv(script, args);
  argv.insert(argv.end(), {"--control", control_.path()});
  for (const std::string& h : holds) argv.insert(argv.end(), {"--hold", h});
  process_.emplace(argv);
}

bool WriterProcess::WaitAt(const std::string& hold, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!std::filesystem::exists(control_.Join("at-" + hold))) {
    if (!process_->running()) {
      ADD_FAILURE() << script_ << " exited before reaching hold point " << hold;
      return false;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << script_ << " did not reach hold point " << hold;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

void WriterProcess::Release(const std::string& hold) {
  std::ofstream(control_.Join("go-" + hold)).close();
}

bool WriterProcess::WaitDone(std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (process_->running()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << script_ << " did not finish";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!std::filesystem::exists(control_.Join("done"))) {
    ADD_FAILURE() << script_ << " exited without finishing";
    return false;
  }
  return true;
}

void RunWriter(const std::string& script, const std::vector<std::string>& args) {
  CommandResult r = RunCommand(WriterArgv(script, args));
  EXPECT_EQ(r.exit_code, 0) << script << " failed:\n" << r.err;
}

}  // namespace sg::testing
