// Shared pieces of the network and time/credential reliability tests: the
// spotguard binary run against an endpoint, checkpoint data that does not
// compress to nothing, the fault proxy's statistics, retry counting from the
// agent's debug log, and clean-up of a test's key prefix.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/crypto.h"
#include "tests/support/big_file.h"
#include "tests/support/s3_test_env.h"
#include "tests/support/subprocess.h"

namespace sg::testing {

// Writes `mib` MiB of float32 "weights" with 12 bits of noise each: every
// block different, compressing to roughly two thirds, like real tensors.
inline FileDigest WriteNoisyWeights(const std::string& path, size_t mib, unsigned seed) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  std::mt19937_64 rng(seed);
  std::string block(1 << 20, '\0');
  Sha256Stream sha;
  for (size_t b = 0; b < mib; ++b) {
    for (size_t i = 0; i < block.size(); i += 8) {
      const uint64_t r = rng();
      const float v[2] = {static_cast<float>(static_cast<int>(r & 0xfff) - 2048) * 1e-4f,
                          static_cast<float>(static_cast<int>((r >> 32) & 0xfff) - 2048) * 1e-4f};
      std::memcpy(&block[i], v, sizeof v);
    }
    out.write(block.data(), static_cast<std::streamsize>(block.size()));
    sha.Update(block);
  }
  return {static_cast<uint64_t>(mib) << 20, sha.FinishHex()};
}

// Digest of every regular file below `dir`, by relative path.
inline std::map<std::string, FileDigest> DigestTree(const std::string& dir) {
  std::map<std::string, FileDigest> out;
  if (!std::filesystem::exists(dir)) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    // The restore marker is spotguard's own file, not part of the tree.
    if (e.is_regular_file() && !e.path().filename().string().starts_with(".spotguard")) {
      out[std::filesystem::relative(e.path(), dir).string()] = DigestOf(e.path().string());
    }
  }
  return out;
}

inline int CountOccurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

// S3 requests the agent retried: S3Client logs "<op> <key>: <outcome> on
// attempt N, retrying in Mms" at debug level for each one.
inline int CountRetries(const std::string& log) { return CountOccurrences(log, ", retrying in "); }

// Attempts answered with an HTTP error (500 or 503) that the agent logged,
// retried or given up ("<outcome> on attempt N, not retried: ..."). Server
// errors and throttles are counted together: a 503 to a HEAD has no body,
// so no SlowDown code, and is taken as a server error.
inline int CountHttpErrorAttempts(const std::string& log) {
  return CountOccurrences(log, "server error on attempt") +
         CountOccurrences(log, "throttled on attempt");
}

// How a test points `spotguard` at a store: job, s3:// URL, endpoint, and
// the environment (credentials) it runs with.
struct AgentTarget {
  std::string job = "reljob";
  std::string store;     // s3://bucket/prefix
  std::string endpoint;  // the proxy, or the gateway itself
  std::map<std::string, std::string> env;
  std::vector<std::string> wrapper;  // e.g. {"ip", "netns", "exec", "ns"}
};

inline CommandResult RunAgent(const AgentTarget& t, std::vector<std::string> args,
                              std::chrono::seconds timeout = std::chrono::seconds(600)) {
  std::vector<std::string> argv = t.wrapper;
  argv.push_back(SPOTGUARD_BIN);
  argv.insert(argv.end(), args.begin(), args.end());
  for (const std::string& a :
       {std::string("--job"), t.job, std::string("--store"), t.store, std::string("--endpoint"),
        t.endpoint, std::string("--log-level"), std::string("debug")}) {
    argv.push_back(a);
  }
  std::map<std::string, std::string> env = t.env;
  env.emplace("SPOTGUARD_CONFIG", "");
  return RunCommand(argv, env, timeout);
}

// Deletes every object and multipart upload under `prefix` of the test bucket.
inline void DeletePrefix(const S3TestEnv& env, const std::string& prefix) {
  auto store = OpenTestS3Store(env, prefix);
  if (!store) return;
  (void)store->CleanStaleWrites("", std::chrono::seconds(-3600), {});
  std::string token;
  do {
    auto page = store->List("", token, 1000);
    if (!page.ok()) {
      ADD_FAILURE() << "listing " << prefix << " for clean-up: " << page.status().ToString();
      return;
    }
    for (const ObjectInfo& o : page->objects) (void)store->Delete(o.key);
    token = page->next_token;
  } while (!token.empty());
}

// Objects left under `prefix` (should be 0 after DeletePrefix).
inline size_t CountObjects(const S3TestEnv& env, const std::string& prefix) {
  auto store = OpenTestS3Store(env, prefix);
  if (!store) return 0;
  auto page = store->List("", "", 1000);
  return page.ok() ? page->objects.size() : 0;
}

inline nlohmann::json ProxyStats(ToolServer& proxy) {
  return nlohmann::json::parse(proxy.Control("GET", "/_proxy/stats"), nullptr, false);
}

// How many 500 and 503 answers the proxy injected (its stats document).
inline long HttpErrorFaults(const nlohmann::json& stats) {
  if (!stats.contains("faults")) return 0;
  return stats["faults"].value("error500", 0L) + stats["faults"].value("slowdown503", 0L);
}

// "reset=2 stall=1 ..." from a stats document's "faults".
inline std::string FaultSummary(const nlohmann::json& faults) {
  std::string out;
  for (const auto& [kind, n] : faults.items()) {
    out += (out.empty() ? "" : " ") + kind + "=" + std::to_string(n.get<long>());
  }
  return out.empty() ? "none" : out;
}

}  // namespace sg::testing
