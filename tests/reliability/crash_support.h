// Shared pieces of the crash and resource-fault trials: the seeded random
// source, tree digests, killing an agent the way a dead instance dies (the
// agent and its trainer's process group at once), running the CLI, and the
// audit of a job's prefix after gc.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/repo/fencing.h"
#include "agent/repo/manifest.h"
#include "agent/repo/restorer.h"
#include "agent/repo/store_layout.h"
#include "common/crypto.h"
#include "common/files.h"
#include "common/s3_store.h"
#include "tests/support/agent_process.h"
#include "tests/support/s3_test_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/tree.h"

namespace sg::testing {

// The trials' seed: SPOTGUARD_CRASH_SEED replays a run; otherwise a fresh
// one. Printed either way, so a failure can be replayed.
inline uint64_t CrashSeed(const std::string& test) {
  uint64_t seed = 0;
  if (const char* v = std::getenv("SPOTGUARD_CRASH_SEED"); v != nullptr && *v != '\0') {
    seed = std::strtoull(v, nullptr, 10);
  } else {
    seed = std::random_device{}();
  }
  std::cout << "[" << test << "] SPOTGUARD_CRASH_SEED=" << seed << " (set it to replay)\n";
  return seed;
}

// Trials per kind: the short run in scripts/test.sh, more with --long.
// SPOTGUARD_CRASH_TRIALS overrides both (for debugging a seed).
inline int TrialCount(int short_run, int long_run) {
  if (const char* n = std::getenv("SPOTGUARD_CRASH_TRIALS"); n != nullptr && std::atoi(n) > 0)
    return std::atoi(n);
  const char* v = std::getenv("SPOTGUARD_LONG_TESTS");
  return v != nullptr && std::string(v) == "1" ? long_run : short_run;
}

// One digest for a whole tree: every path, mode and byte.
inline std::string TreeDigest(const Tree& tree) {
  Sha256Stream sha;
  for (const auto& [path, f] : tree) {
    sha.Update(path + "\n" + std::to_string(f.mode) + "\n" + std::to_string(f.content.size()) +
               "\n");
    sha.Update(f.content);
  }
  return sha.FinishHex();
}

// Entries of `dir` whose names start with `prefix`.
inline std::vector<std::string> EntriesStartingWith(const std::string& dir,
                                                    const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(prefix)) out.push_back(name);
  }
  return out;
}

// Process groups of `pid`'s children (the trainer runs in its own).
inline std::set<pid_t> ChildProcessGroups(pid_t pid) {
  std::set<pid_t> groups;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return groups;
  while (struct dirent* e = ::readdir(proc)) {
    const std::string name = e->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat("/proc/" + name + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    long ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (ppid == pid && pgrp > 1 && pgrp != ::getpgrp()) groups.insert(static_cast<pid_t>(pgrp));
  }
  ::closedir(proc);
  return groups;
}

// kill -9 of the agent and, as a lost instance takes them too, of its
// children's process groups. Returns true when the agent was still running.
inline bool KillLikeALostInstance(AgentProcess& agent) {
  const pid_t pid = agent.pid();
  if (pid <= 0) return false;
  const std::set<pid_t> groups = ChildProcessGroups(pid);
  const bool alive = ::kill(pid, SIGKILL) == 0;
  for (pid_t g : groups) ::kill(-g, SIGKILL);
  return alive;
}

// The spotguard CLI with the test gateway's credentials.
struct Cli {
  std::map<std::string, std::string> env;
  CommandResult Run(std::vector<std::string> args,
                    std::chrono::seconds timeout = std::chrono::seconds(120)) const {
    args.insert(args.begin(), SPOTGUARD_BIN);
    return RunCommand(args, env, timeout);
  }
};

inline std::map<std::string, std::string> AgentEnv(const S3TestEnv& s3) {
  return {{"AWS_ACCESS_KEY_ID", s3.access_key},
          {"AWS_SECRET_ACCESS_KEY", s3.secret_key},
          {"AWS_EC2_METADATA_DISABLED", "true"},
          {"SPOTGUARD_CONFIG", ""}};
}

// What `spotguard gc` must leave under a job: committed snapshots (their
// manifest, claim and the objects the manifest names) and the agent's own
// documented objects (latest, lease, complete, events/). Everything else is
// an orphan.
struct PrefixAudit {
  size_t objects = 0;
  size_t orphans = 0;
  size_t multipart_uploads = 0;
  size_t uncommitted_dirs = 0;
  std::vector<std::string> orphan_keys;
  std::vector<std::string> upload_keys;  // of the unfinished multipart uploads
};

// For a failure message: each orphan left after gc, whether it was an
// object or an unfinished upload before gc, and what gc printed.
inline std::string ExplainOrphans(const PrefixAudit& before, const PrefixAudit& after,
                                  const std::string& gc_output) {
  std::string out;
  for (const std::string& key : after.orphan_keys) {
    auto in = [&](const std::vector<std::string>& v) {
      return std::find(v.begin(), v.end(), key) != v.end() ? "yes" : "no";
    };
    out += key + ": an orphan before gc " + in(before.orphan_keys) + ", an unfinished upload " +
           in(before.upload_keys) + "\n";
  }
  return out + "gc said:\n" + gc_output;
}

inline PrefixAudit AuditJob(S3Store& store, const S3TestEnv& s3, const std::string& prefix,
                            const std::string& job) {
  PrefixAudit audit;
  auto uploads = store.client().ListMultipartUploads(s3.bucket, prefix + "/" + JobPrefix(job));
  EXPECT_TRUE(uploads.ok()) << uploads.status().ToString();
  if (uploads.ok()) {
    audit.multipart_uploads = uploads->size();
    for (const MultipartUploadInfo& u : *uploads) {
      audit.upload_keys.push_back(u.key.substr(std::min(u.key.size(), prefix.size() + 1)));
    }
  }

  auto objects = ListAll(store, JobPrefix(job));
  EXPECT_TRUE(objects.ok()) << objects.status().ToString();
  if (!objects.ok()) return audit;
  audit.objects = objects->size();
  SnapshotCatalog catalog(store, job);
  auto committed = catalog.Committed();
  EXPECT_TRUE(committed.ok());
  std::set<std::string> referenced = {LatestKey(job), JobPrefix(job) + "lease",
                                      JobPrefix(job) + "complete"};
  if (committed.ok()) {
    for (uint64_t seq : *committed) {
      referenced.insert(ManifestKey(job, seq));
      referenced.insert(ClaimKey(job, seq));
      auto m = catalog.ReadManifest(seq);
      EXPECT_TRUE(m.ok()) << m.status().ToString();
      if (!m.ok()) continue;
      for (const ManifestFile& f : m->files) referenced.insert(JobPrefix(job) + f.key);
      // Frames reused from an older snapshot's objects (docs/design.md §4):
      // that object stays while a kept manifest needs it, whatever its dir.
      for (const std::string& key : m->ReferencedKeys()) referenced.insert(JobPrefix(job) + key);
    }
  }
  std::set<std::string> uncommitted_dirs;
  for (const ObjectInfo& o : *objects) {
    // Events, the lease generations' fences and the shipped log segments
    // are the job's history, not leftovers.
    if (referenced.count(o.key) || o.key.starts_with(JobPrefix(job) + "events/") ||
        o.key.starts_with(FencesPrefix(job)) || ParseLogSegmentKey(job, o.key)) {
      continue;
    }
    ++audit.orphans;
    audit.orphan_keys.push_back(o.key);
    if (o.key.starts_with(SnapshotsPrefix(job)))
      uncommitted_dirs.insert(o.key.substr(0, SnapshotsPrefix(job).size() + 10));
  }
  audit.uncommitted_dirs = uncommitted_dirs.size();
  return audit;
}

}  // namespace sg::testing
