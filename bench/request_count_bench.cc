// Store requests per commit and per start (issue 34, item 7), counted by
// kind: the agent's own code (SnapshotWriter, the lease, the fence, the
// restore at start, retention, the group records and the part restore)
// runs against a file:// store behind a counting ObjectStore, one phase at
// a time, on one process and one clock. Each ObjectStore call is counted
// as the S3 request(s) S3Store makes for it: Put, Get/GetTo, Head, Delete
// one each; List one a page; a writer one PUT when the object never fills
// an 8 MiB part (S3Store's part size), else CreateMultipartUpload, one
// UploadPart a part and CompleteMultipartUpload. Retries are not counted
// (a loopback file store never fails). What each phase runs is printed
// with it and described in bench/RESULTS.md, "Store requests per commit".
//
// Run: build/release/bench/request_count_bench [--json] [--trace]
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/config/config.h"
#include "agent/ledger/events.h"
#include "agent/logs/log_store.h"
#include "agent/repo/fencing.h"
#include "agent/repo/group_restore.h"
#include "agent/repo/group_retention.h"
#include "agent/repo/group_store.h"
#include "agent/repo/lease.h"
#include "agent/repo/open_store.h"
#include "agent/repo/retention.h"
#include "agent/repo/snapshot_writer.h"
#include "agent/repo/store_layout.h"
#include "agent/run/job_start.h"
#include "common/clock.h"
#include "common/file_store.h"
#include "common/files.h"
#include "common/log.h"
#include "common/sd_notify.h"
#include "tests/support/capture_in_place.h"

namespace sg::bench {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kPartSize = 8ull << 20;  // S3Store's parts (common/s3_multipart.h)

// Request counts by S3 operation name.
class Counts {
 public:
  bool trace = false;  // --trace: each request and its key to stderr
  void Add(const std::string& kind, const std::string& key = "", int n = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    counts_[kind] += n;
    if (trace) std::cerr << "  " << kind << " " << key << "\n";
  }
  std::map<std::string, int> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(counts_, {});
  }

 private:
  std::mutex mu_;
  std::map<std::string, int> counts_;
};

// What S3Store::Writer sends for the bytes appended: parts once 8 MiB are
// buffered, a single PUT when no part was ever full.
class CountingWriter final : public ObjectWriter {
 public:
  CountingWriter(std::unique_ptr<ObjectWriter> base, Counts& counts, std::string key)
      : base_(std::move(base)), counts_(counts), key_(std::move(key)) {}
  Status Append(std::string data) override {
    buffered_ += data.size();
    if (buffered_ >= kPartSize) {
      if (!started_) counts_.Add("CreateMultipartUpload", key_);
      started_ = true;
      counts_.Add("UploadPart", key_);
      buffered_ = 0;
    }
    return base_->Append(std::move(data));
  }
  StatusOr<std::string> Commit() override {
    if (!started_) {
      counts_.Add("PUT", key_);
    } else {
      if (buffered_ > 0) counts_.Add("UploadPart", key_);
      counts_.Add("CompleteMultipartUpload", key_);
    }
    return base_->Commit();
  }
  void Abort() override {
    if (started_) counts_.Add("AbortMultipartUpload", key_);
    base_->Abort();
  }

 private:
  std::unique_ptr<ObjectWriter> base_;
  Counts& counts_;
  const std::string key_;
  uint64_t buffered_ = 0;
  bool started_ = false;
};

class CountingStore final : public ObjectStore {
 public:
  explicit CountingStore(ObjectStore& base) : base_(base) {}
  Counts counts;

  StatusOr<std::string> Put(const std::string& key, std::string_view data,
                            const PutCondition& condition) override {
    counts.Add("PUT", key);
    return base_.Put(key, data, condition);
  }
  StatusOr<std::string> Get(const std::string& key, std::optional<ByteRange> range,
                            ObjectInfo* info) override {
    counts.Add("GET", key);
    return base_.Get(key, range, info);
  }
  Status GetTo(const std::string& key, ByteRange range, const BodySink& sink) override {
    counts.Add("GET", key);
    return base_.GetTo(key, range, sink);
  }
  StatusOr<ObjectInfo> Head(const std::string& key) override {
    counts.Add("HEAD", key);
    return base_.Head(key);
  }
  StatusOr<ListPage> List(const std::string& prefix, const std::string& token,
                          int max_keys) override {
    counts.Add("LIST", prefix);
    return base_.List(prefix, token, max_keys);
  }
  Status Delete(const std::string& key) override {
    counts.Add("DELETE", key);
    return base_.Delete(key);
  }
  StatusOr<std::unique_ptr<ObjectWriter>> NewWriter(const std::string& key,
                                                    uint64_t size_hint = 0) override {
    SG_ASSIGN_OR_RETURN(std::unique_ptr<ObjectWriter> w, base_.NewWriter(key, size_hint));
    return std::unique_ptr<ObjectWriter>(new CountingWriter(std::move(w), counts, key));
  }
  StatusOr<int> CleanStaleWrites(const std::string& prefix, std::chrono::seconds age,
                                 const KeyFilter& spare) override {
    counts.Add("ListMultipartUploads", prefix);
    return base_.CleanStaleWrites(prefix, age, spare);
  }
  std::string Describe() const override { return "counting(" + base_.Describe() + ")"; }

 private:
  ObjectStore& base_;
};

void Check(const Status& st, const std::string& what) {
  if (st.ok()) return;
  std::cerr << "request_count_bench: " << what << ": " << st.ToString() << "\n";
  std::exit(1);
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::string out(n, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(out.data() + i, &x, std::min<size_t>(8, n - i));
  }
  return out;
}

// A checkpoint of 48 MiB: model.pt 40 MiB, optim.pt 8 MiB, a small json.
void WriteCheckpoint(const std::string& dir, uint64_t seed) {
  fs::create_directories(dir);
  Check(WriteFileAtomic(dir + "/model.pt", RandomBytes(40u << 20, seed)), "model.pt");
  Check(WriteFileAtomic(dir + "/optim.pt", RandomBytes(8u << 20, seed + 1)), "optim.pt");
  Check(WriteFileAtomic(dir + "/config.json", R"({"lr": 0.001})"), "config.json");
}

// About 2% of it changed: 1 MiB of model.pt in place.
void TouchCheckpoint(const std::string& dir, uint64_t seed) {
  auto model = ReadFileToString(dir + "/model.pt");
  Check(model.status(), "read model.pt");
  model->replace(20u << 20, 1u << 20, RandomBytes(1u << 20, seed));
  Check(WriteFileAtomic(dir + "/model.pt", *model), "model.pt");
}

struct Phase {
  std::string name;
  std::string runs;
  std::map<std::string, int> counts;
};

// Adds `p`; with --trace, names it below the requests it counted.
void Record(std::vector<Phase>& phases, const Counts& counts, Phase p) {
  if (counts.trace) std::cerr << "== " << p.name << "\n";
  phases.push_back(std::move(p));
}

// Drops what was counted since the last phase (the setup between phases).
void Discard(Counts& counts) {
  counts.Take();
  if (counts.trace) std::cerr << "== (not counted: setup)\n";
}

Config BenchConfig(const std::string& root, const std::string& ckpt, int nodes) {
  ConfigSources sources;
  sources.flags = {{"job", nodes > 1 ? "group-job" : "job"},
                   {"store", "file://" + root + "/store"},
                   {"checkpoint_dir", ckpt},
                   {"nodes", std::to_string(nodes)}};
  sources.command_args = {"true"};
  ConfigResult r = LoadConfig(sources, ConfigNeeds{.job = true, .checkpoint_dir = true});
  if (!r.ok()) {
    std::cerr << "request_count_bench: config: " << r.problems.front().message << "\n";
    std::exit(1);
  }
  return r.config;
}

SnapshotResult Commit(CountingStore& store, Clock& clock, const Config& config,
                      const std::string& job, const std::string& dir, int64_t step,
                      LeaseKeeper& lease, const std::string& instance) {
  auto capture = testing::CaptureTree(dir, step);
  Check(capture.status(), "capture");
  SnapshotRequest request;
  request.job = job;
  request.preset = std::string(PresetName(config.preset));
  request.instance = instance;
  request.generation = lease.generation();
  if (job == config.job) request.verify_before_commit = [&] { return lease.Renew(); };
  SnapshotWriter writer(store, clock, SnapshotOptionsOf(config));
  auto r = writer.Write(*capture, request);
  Check(r.status(), "snapshot of " + dir);
  return *r;
}

// One node's two commits and the next instance's `run` start.
void SingleNode(const std::string& root, CountingStore& store, Clock& clock,
                std::vector<Phase>& phases) {
  const Config config = BenchConfig(root, root + "/ckpt-a", 1);
  LeaseKeeper lease(store, clock, config.job, "i-a", LeaseOptions{});
  auto taken = lease.TryAcquire();
  Check(taken.status(), "lease");
  Check(DrawFence(store, config.job, lease.generation(), "i-a", FormatUtc(clock.Now(), true))
            .status(),
        "fence");
  EventLog events(store, clock, config.job, "i-a");
  WriteCheckpoint(config.checkpoint_dir, 1);
  Discard(store.counts);
  for (int i = 0; i < 2; ++i) {
    if (i == 1) TouchCheckpoint(config.checkpoint_dir, 7);
    const std::string which = i == 0 ? "first (48 MiB, 3 files)" : "incremental (2% changed)";
    SnapshotResult s =
        Commit(store, clock, config, config.job, config.checkpoint_dir, i + 1, lease, "i-a");
    events.Note("snapshot", {{"seq", s.seq}});
    Record(phases, store.counts,
           {"single node: commit, " + which,
            "SnapshotWriter::Write (lease renewal before the manifest), the snapshot "
            "event",
            store.counts.Take()});
    Check(CollectGarbage(store, clock, config.job, GcOptions{.keep = config.keep}).status(), "gc");
    Check(PruneLogs(store, config.job, config.logs_keep).status(), "logs");
    Record(phases, store.counts,
           {"single node: retention after the " + std::string(i == 0 ? "first" : "second"),
            "CollectGarbage (keep 3), PruneLogs (logs_keep 10), as the loop runs them "
            "after each commit",
            store.counts.Take()});
  }
  Check(lease.Release(), "release");
  Discard(store.counts);
  // The next instance: an empty checkpoint dir, the whole start of `run`.
  const Config next = BenchConfig(root, root + "/ckpt-b", 1);
  LeaseKeeper next_lease(store, clock, next.job, "i-b", LeaseOptions{});
  std::mutex lease_mu;
  EventLog next_events(store, clock, next.job, "i-b");
  const std::map<std::string, std::string> env;
  SystemdNotifier notifier(env);
  const std::string instance = "i-b";
  StartSteps steps{next,      store,    clock,    next_events,
                   next_lease, lease_mu, notifier, instance,
                   [&](uint64_t newest_seq) {
                     return DrawFenceAfter(store, next.job, next_lease.generation(), newest_seq,
                                           instance, FormatUtc(clock.Now(), true))
                         .status();
                   }};
  JobStart start = StartJob(steps);
  Check(start.status, "run start");
  if (start.outcome != JobStart::Outcome::kStarted)
    Check(Status::IOError("not started"), "run start");
  Record(phases, store.counts,
         {"single node: run start that restores",
          "StartJob: the complete marker, the lease, the fence, the history, the "
          "restore, the restore event",
          store.counts.Take()});
}

// Two nodes: each uploads its part and announces it, the coordinator
// commits the group snapshot; then a replacement of rank 1 starts. Each
// rank's checkpoint also holds a 1 MiB adapter.bin: round 2 changes 1 MiB
// of model.pt, round 3 only the adapter (a LoRA-style step, about 2%).
void Group(const std::string& root, CountingStore& store, Clock& clock,
           std::vector<Phase>& phases) {
  const Config config = BenchConfig(root, root + "/g0", 2);
  GroupStore group(store, config.job);
  LeaseKeeper lease(store, clock, config.job, "i-g0", LeaseOptions{});
  Check(lease.TryAcquire().status(), "group lease");
  const std::string dirs[2] = {root + "/g0", root + "/g1"};
  for (int rank = 0; rank < 2; ++rank) {
    WriteCheckpoint(dirs[rank], 10 + rank);
    Check(WriteFileAtomic(dirs[rank] + "/adapter.bin", RandomBytes(1u << 20, 15 + rank)),
          "adapter.bin");
  }
  for (int round = 1; round <= 3; ++round) {
    for (int rank = 0; rank < 2 && round == 2; ++rank) TouchCheckpoint(dirs[rank], 20 + rank);
    for (int rank = 0; rank < 2 && round == 3; ++rank) {
      Check(WriteFileAtomic(dirs[rank] + "/adapter.bin", RandomBytes(1u << 20, 30 + rank)),
            "adapter.bin");
    }
    Discard(store.counts);
    GroupCommit g{.seq = static_cast<uint64_t>(round),
                  .round = 1,
                  .nodes = 2,
                  .step = round,
                  .generation = lease.generation(),
                  .created = FormatUtc(clock.Now()),
                  .parts = {}};
    uint64_t uploaded = 0, total_bytes = 0;  // the group incremental figure (issue 34)
    for (int rank = 0; rank < 2; ++rank) {
      SnapshotResult s = Commit(store, clock, config, PartJob(config.job, rank), dirs[rank], round,
                                lease, "i-g" + std::to_string(rank));
      uploaded += s.new_bytes;
      total_bytes += s.stored_bytes;
      PartRecord part{rank, round, s.seq, "i-g" + std::to_string(rank), s.bytes, s.stored_bytes};
      Check(group.AnnouncePart(1, part), "announce");
      g.parts.push_back(part);
    }
    const std::string which = round == 1   ? "first"
                              : round == 2 ? "incremental (1 MiB of model.pt changed)"
                                           : "LoRA-style (only the 1 MiB adapter changed)";
    Record(phases, store.counts,
           {"group of 2: part commits, both ranks, " + which,
            "per rank: SnapshotWriter::Write of its part job, AnnouncePart; uploaded " +
                std::to_string(uploaded) + " of the parts' " + std::to_string(total_bytes) +
                " stored bytes",
            store.counts.Take()});
    Check(group.Parts(1).status(), "parts");
    Check(lease.Renew(), "renew");
    Check(group.CommitGroup(g), "commit");
    Record(phases, store.counts,
           {"group of 2: group commit, " + which,
            "the coordinator: Parts(round) (the look that finds the last part), "
            "lease renewal, CommitGroup",
            store.counts.Take()});
    Check(CollectGroupGarbage(store, clock, config.job, GcOptions{.keep = config.keep}).status(),
          "group gc");
    Check(PruneLogs(store, config.job, config.logs_keep).status(), "logs");
    Record(phases, store.counts,
           {"group of 2: retention after the " +
                std::string(round == 1 ? "first" : round == 2 ? "second" : "third") +
                " group commit",
            "the coordinator: CollectGroupGarbage (keep 3), PruneLogs (logs_keep 10)",
            store.counts.Take()});
  }
  // A replacement of rank 1: its start reads, its member record, its part.
  const Config next = BenchConfig(root, root + "/g1-new", 2);
  EventLog events(store, clock, next.job, "i-g1-new");
  (void)store.Head(CompleteKey(next.job));  // NotFound: not complete
  Check(CheckGroupStart(store, next), "group start");
  events.Note("agent-start", {});
  MemberRecord me{"i-g1-new", "agent-1", "10.0.0.2", next.job, 2, {"true"}, "", 1};
  Check(group.WriteMember(me), "member");
  auto groups = group.Groups();
  Check(groups.status(), "groups");
  RestoreOptions options;
  options.replace_foreign = true;
  Check(RestoreGroupPart(store, next.job, next.preset, groups->back(), 1, next.checkpoint_dir,
                         options)
            .status(),
        "part restore");
  Record(phases, store.counts,
         {"group of 2: node start that restores its part",
          "the start reads (complete marker, CheckGroupStart), the agent-start event, "
          "its member record, Groups(), RestoreGroupPart; not the heartbeats while "
          "it waits for its round",
          store.counts.Take()});
}

int Main(int argc, char** argv) {
  bool json = false, trace = false;
  for (int i = 1; i < argc; ++i) {
    json = json || std::string(argv[i]) == "--json";
    trace = trace || std::string(argv[i]) == "--trace";
  }
  InitLogging(LogLevel::kWarn, LogFormat::kText);
  const char* tmp = std::getenv("TMPDIR");
  const std::string root =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/spotguard-requests-" + RandomHex(4);
  fs::create_directories(root);
  auto files = FileStore::Open(root + "/store");
  Check(files.status(), "store");
  CountingStore store(**files);
  store.counts.trace = trace;
  Clock& clock = SystemClock();
  std::vector<Phase> phases;
  SingleNode(root, store, clock, phases);
  Group(root, store, clock, phases);
  std::error_code ec;
  fs::remove_all(root, ec);
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Phase& p : phases) {
    int total = 0;
    for (const auto& [k, n] : p.counts) total += n;
    if (json) {
      out.push_back({{"phase", p.name}, {"runs", p.runs}, {"counts", p.counts}, {"total", total}});
      continue;
    }
    std::cout << p.name << ": " << total << " requests\n  ";
    for (const auto& [k, n] : p.counts) std::cout << k << " " << n << "  ";
    std::cout << "\n  (" << p.runs << ")\n";
  }
  if (json) std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace sg::bench

int main(int argc, char** argv) { return sg::bench::Main(argc, argv); }
