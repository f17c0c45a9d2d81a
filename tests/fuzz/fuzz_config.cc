// libFuzzer target: agent/config LoadConfig (JSON with comments, environment
// values, validation) and common/duration ParseDuration on arbitrary bytes.
//
// Input: lines before a line "---" are environment entries NAME=VALUE (the
// SPOTGUARD_* variables the loader reads); the rest is the config file.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "agent/config/config.h"
#include "common/duration.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

const std::string& ConfigPath() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/spotguard-fuzz-config-" +
           std::to_string(getpid()) + ".json";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  sg::ConfigSources sources;
  std::string_view file = input;
  if (const size_t sep = input.find("\n---\n"); sep != std::string_view::npos) {
    std::string_view env = input.substr(0, sep);
    file = input.substr(sep + 5);
    while (!env.empty()) {
      const size_t nl = env.find('\n');
      const std::string_view line = env.substr(0, nl);
      env = nl == std::string_view::npos ? std::string_view() : env.substr(nl + 1);
      const size_t eq = line.find('=');
      if (eq == std::string_view::npos) continue;
      sources.env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    }
  }
  // Also the duration parser alone, on the whole input.
  (void)sg::ParseDuration(input);

  FILE* f = std::fopen(ConfigPath().c_str(), "wb");
  if (f == nullptr) std::abort();
  if (!file.empty() && std::fwrite(file.data(), 1, file.size(), f) != file.size()) std::abort();
  std::fclose(f);
  sources.file = ConfigPath();
  sg::ConfigNeeds needs{.job = true, .checkpoint_dir = true, .command = false};
  sg::ConfigResult r = sg::LoadConfig(sources, needs);
  if (r.ok()) {
    // What validated must be printable, and its printed form must load again.
    const std::string printed = sg::ConfigToJson(r.config, /*redact=*/false).dump();
    SG_FUZZ_CHECK(!r.config.job.empty(), "a config without a job was accepted");
    SG_FUZZ_CHECK(!r.config.checkpoint_dir.empty() && r.config.checkpoint_dir.front() == '/',
                  "checkpoint_dir is not absolute");
    (void)printed;
  } else {
    for (const sg::ConfigProblem& p : r.problems) {
      SG_FUZZ_CHECK(!p.message.empty(), "a problem without a message");
    }
  }
  return 0;
}
