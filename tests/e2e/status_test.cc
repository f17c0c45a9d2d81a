// `spotguard status` through the binary, on a file:// store that the real
// writers prepared (SnapshotWriter, LeaseKeeper, EventLog), as people and
// scripts read it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "agent/ledger/events.h"
#include "agent/repo/lease.h"
#include "agent/repo/snapshot_writer.h"
#include "common/file_store.h"
#include "tests/support/capture_in_place.h"
#include "tests/support/fake_clock.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

using nlohmann::json;

class StatusCli : public ::testing::Test {
 protected:
  StatusCli() {
    auto store = FileStore::Open(dir_.Join("store"));
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    clock_.SetNow(SystemClock().Now() - std::chrono::minutes(30));
  }
  CommandResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), {SPOTGUARD_BIN, "status"});
    return RunCommand(args, {{"SPOTGUARD_JOB", "e2e"},
                             {"SPOTGUARD_STORE", "file://" + dir_.Join("store")},
                             {"SPOTGUARD_CONFIG", ""},
                             {"SPOTGUARD_LEASE_TIMEOUT", ""}});
  }
  json RunJson() {
    auto r = Run({"--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out);
  }
  uint64_t Snapshot(const std::string& name, size_t bytes, std::optional<int64_t> step) {
    SnapshotRequest req;
    req.job = "e2e";
    auto capture = CaptureFile(name, dir_.WriteFile("ckpt/" + name, std::string(bytes, 'w')), step);
    EXPECT_TRUE(capture.ok()) << capture.status().ToString();
    if (!capture.ok()) return 0;
    req.instance = "i-0abc";
    req.generation = 1;
    SnapshotWriter writer(*store_, SystemClock(), SnapshotOptions{});
    auto r = writer.Write(*capture, req);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->seq : 0;
  }
  // Records an event one second after the previous one.
  void Event(const std::string& kind, nlohmann::ordered_json details = {}) {
    clock_.Advance(std::chrono::seconds(1));
    EventLog log(*store_, clock_, "e2e", "i-0abc");
    ASSERT_TRUE(log.Record(kind, std::move(details)).ok());
  }

  TempDir dir_;
  std::unique_ptr<FileStore> store_;
  FakeClock clock_;
};

TEST_F(StatusCli, AJobWithNothingInTheStoreSaysSoAndExitsZero) {
  auto r = Run({});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("job e2e: nothing in file://"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no lease, no snapshot, no events"), std::string::npos) << r.out;

  json j = RunJson();
  EXPECT_EQ(j["job"], "e2e");
  EXPECT_EQ(j["empty"], true);
  EXPECT_TRUE(j["lease"].is_null());
  EXPECT_EQ(j["snapshots"]["committed"], 0);
  EXPECT_TRUE(j["snapshots"]["newest"].is_null());
  EXPECT_EQ(j["complete"], false);
  EXPECT_EQ(j["events"]["total"], 0);
  EXPECT_EQ(j["interruptions"]["total"], 0);
}

TEST_F(StatusCli, ShowsTheLeaseHolderNewestSnapshotAndInterruptions) {
  ASSERT_EQ(Snapshot("step_100.pt", 1000, 100), 1u);
  ASSERT_EQ(Snapshot("step_1200.pt", 250000, 1200), 2u);
  LeaseKeeper lease(*store_, SystemClock(), "e2e", "i-0abc", LeaseOptions{});
  auto taken = lease.TryAcquire();
  ASSERT_TRUE(taken.ok() && taken->outcome == LeaseKeeper::Outcome::kAcquired);
  Event("start");
  Event("snapshot", {{"seq", 1}});
  Event("rebalance");
  Event("notice", {{"action", "terminate"}, {"deadline", "2026-11-22T08:24:00Z"}});
  Event("stop");

  json j = RunJson();
  EXPECT_EQ(j["empty"], false);
  EXPECT_EQ(j["lease"]["instance"], "i-0abc");
  EXPECT_EQ(j["lease"]["generation"], 1);
  EXPECT_EQ(j["lease"]["released"], false);
  EXPECT_EQ(j["lease"]["agent_pid"], ::getpid()) << "the lease names the agent process";
  EXPECT_EQ(j["lease"]["stale"], false);
  EXPECT_LT(j["lease"]["heartbeat_age_seconds"].get<int>(), 60);
  EXPECT_EQ(j["snapshots"]["committed"], 2);
  EXPECT_EQ(j["snapshots"]["newest"]["seq"], 2);
  EXPECT_EQ(j["snapshots"]["newest"]["size"], 250000);
  EXPECT_LT(j["snapshots"]["newest"]["stored_size"].get<int>(), 250000);
  EXPECT_GT(j["snapshots"]["newest"]["stored_size"].get<int>(), 0);
  EXPECT_EQ(j["snapshots"]["newest"]["step"], 1200);
  EXPECT_EQ(j["snapshots"]["newest"]["instance"], "i-0abc");
  EXPECT_EQ(j["complete"], false);
  EXPECT_EQ(j["interruptions"]["total"], 2);
  EXPECT_EQ(j["interruptions"]["recent"][0]["kind"], "notice");
  EXPECT_EQ(j["interruptions"]["recent"][0]["action"], "terminate");
  EXPECT_EQ(j["interruptions"]["recent"][1]["kind"], "rebalance");
  EXPECT_EQ(j["events"]["total"], 5);
  EXPECT_EQ(j["events"]["recent"][0]["kind"], "stop");
  EXPECT_EQ(j["events"]["recent"][4]["kind"], "start");

  auto text = Run({});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(
      text.out.find("held by i-0abc (agent pid " + std::to_string(::getpid()) + ", generation 1)"),
      std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("0000000002, created"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("step 1200"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("2 committed snapshots"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("complete         no"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("2 recorded"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("notice  i-0abc  action=terminate"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("STALE"), std::string::npos) << text.out;
}

TEST_F(StatusCli, ACompletedJobWithAReleasedLease) {
  ASSERT_EQ(Snapshot("final.pt", 5000, 9000), 1u);
  LeaseKeeper lease(*store_, SystemClock(), "e2e", "i-0def", LeaseOptions{});
  ASSERT_TRUE(lease.TryAcquire().ok());
  ASSERT_TRUE(lease.Release().ok());
  ASSERT_TRUE(
      store_
          ->Put("e2e/complete",
                R"({"time":"2026-11-22T09:00:00Z","instance":"i-0def","seq":1,"step":9000})",
                PutCondition::CreateOnly())
          .ok());
  Event("complete", {{"seq", 1}});

  json j = RunJson();
  EXPECT_EQ(j["complete"], true);
  EXPECT_EQ(j["completion"]["instance"], "i-0def");
  EXPECT_EQ(j["completion"]["seq"], 1);
  EXPECT_EQ(j["completion"]["step"], 9000);
  EXPECT_EQ(j["lease"]["released"], true);
  EXPECT_EQ(j["lease"]["stale"], false);

  auto text = Run({});
  EXPECT_NE(text.out.find("yes, at 2026-11-22T09:00:00Z by i-0def, final snapshot 0000000001, "
                          "step 9000"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("released by i-0def"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("interruptions    none recorded"), std::string::npos) << text.out;
}

TEST_F(StatusCli, ALeaseWhoseHeartbeatIsOlderThanTheTimeoutIsStale) {
  LeaseKeeper lease(*store_, clock_, "e2e", "i-0old", LeaseOptions{});  // 30 minutes ago
  ASSERT_TRUE(lease.TryAcquire().ok());
  json j = RunJson();
  EXPECT_EQ(j["lease"]["stale"], true);
  EXPECT_GE(j["lease"]["heartbeat_age_seconds"].get<int>(), 29 * 60);
  auto text = Run({});
  EXPECT_NE(text.out.find("STALE: older than lease.timeout 2m30s"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(30m 0"), std::string::npos) << text.out;
}

TEST_F(StatusCli, ShowsTheLastTenEventsButFindsOlderInterruptions) {
  Event("notice", {{"action", "stop"}});
  for (int i = 0; i < 14; ++i) Event("snapshot", {{"seq", i + 1}});
  json j = RunJson();
  EXPECT_EQ(j["events"]["total"], 15);
  EXPECT_EQ(j["events"]["recent"].size(), 10u);
  EXPECT_EQ(j["events"]["recent"][0]["seq"], 14);
  EXPECT_EQ(j["interruptions"]["total"], 1);
  EXPECT_EQ(j["interruptions"]["recent"][0]["action"], "stop");
  auto text = Run({});
  EXPECT_NE(text.out.find("the last 10 of 15"), std::string::npos) << text.out;
}

TEST_F(StatusCli, DamagedObjectsAreNamedWithoutFailing) {
  ASSERT_TRUE(store_->Put("e2e/lease", "not a lease", PutCondition::None()).ok());
  ASSERT_TRUE(store_->Put("e2e/complete", "{{{", PutCondition::None()).ok());
  auto r = Run({});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("problem: e2e/lease: the lease object is not a spotguard lease"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("problem: e2e/complete"), std::string::npos) << r.out;
  json j = RunJson();
  EXPECT_EQ(j["complete"], true);
  EXPECT_EQ(j["problems"].size(), 2u);
}

// A file:// store that is not there is a config error for a command that
// only reads (docs/design.md §2): exit 2, naming the path.
TEST_F(StatusCli, AStoreThatCannotBeOpenedIsNamedAndExitsTwo) {
  auto r = RunCommand({SPOTGUARD_BIN, "status", "--job", "e2e", "--store", "file:///dev/null/x"},
                      {{"SPOTGUARD_CONFIG", ""}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("spotguard status:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/dev/null/x"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace sg::testing
