// The agent's loop (agent/run/daemon.cc) with the policy it executes, driven
// through its seams by fakes (tests/support/agent_fakes.h): a fake trainer,
// checkpoint source, uploader, Auto Scaling API and metadata service on one
// FakeClock, with a file:// store in a temporary dir. No process is started
// and nothing sleeps: the loop's wait advances the fake clock and runs the
// scripted steps, so every run takes the same path. The real parts are
// proven end to end in tests/e2e/agent_test.cc.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <thread>

#include "agent/config/config.h"
#include "agent/run/daemon.h"
#include "agent/config/exit_codes.h"
#include "common/file_store.h"
#include "common/files.h"
#include "common/sd_notify.h"
#include "common/zstd_codec.h"
#include "agent/repo/snapshot_writer.h"
#include "tests/support/agent_fakes.h"
#include "tests/support/capture_in_place.h"
#include "tests/support/faulty_store.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class AgentLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.Join("ckpt"));
    auto store = FileStore::Open(dir_.Join("store"));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    flags_ = {{"job", "job"},
              {"store", "file://" + dir_.Join("store")},
              {"checkpoint_dir", dir_.Join("ckpt")},
              {"preset", "pytorch"},
              {"checkpoint_signal", "SIGUSR1"},
              {"stop_signal", "SIGTERM"},
              {"upload_interval", "60s"},
              {"imds.poll_interval", "1s"},
              {"lease.heartbeat", "2s"},
              {"lease.timeout", "20s"},
              {"restart.max", "2"},
              {"restart.backoff", "5s"},
              {"restart.max_backoff", "8s"}};
  }

  // `store` in place of store_; `adjust` changes the world's ports.
  AgentResult Run(ObjectStore* store = nullptr,
                  const std::function<void(AgentPorts&)>& adjust = {}) {
    ConfigSources sources;
    sources.flags = flags_;
    sources.command_args = {"/nonexistent/trainer"};  // the fake launcher starts nothing
    ConfigResult loaded = LoadConfig(sources, ConfigNeeds{true, true, true});
    EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.problems.front().message);
    config_ = loaded.config;
    AgentPorts ports = w_.Ports();
    if (adjust) adjust(ports);
    AgentContext context{config_,   env_,     store ? *store : *store_, w_.clock, &w_.imds,
                         notifier_, "i-test", nullptr,                  ports};
    return RunAgent(context);
  }

  // Kinds of the job's event records, sorted: records of one fake
  // millisecond share a time stamp, so their keys do not tell their order
  // (the policy's tests check the order).
  std::vector<std::string> Events() {
    std::vector<std::string> kinds;
    auto listed = ListAll(*store_, "job/events/");
    EXPECT_TRUE(listed.ok());
    for (const ObjectInfo& o : *listed) {
      // "job/events/20261122T082200.123Z-<kind>.json"
      const std::string name = o.key.substr(o.key.find("Z-") + 2);
      kinds.push_back(name.substr(0, name.size() - std::string(".json").size()));
    }
    std::sort(kinds.begin(), kinds.end());
    return kinds;
  }

  std::string Lease() {
    auto body = store_->Get("job/lease");
    return body.ok() ? *body : "";
  }

  TempDir dir_;
  std::unique_ptr<ObjectStore> store_;
  std::map<std::string, std::string> flags_;
  std::map<std::string, std::string> env_;
  SystemdNotifier notifier_{env_};
  Config config_;
  FakeJobWorld w_;
};

TEST_F(AgentLoopTest, ANoticeGetsAFreshCheckpointCommittedAndExits75) {
  // The trainer answers the checkpoint signal with step 200, three seconds later.
  w_.on_signal = [&](int signo) {
    if (signo == SIGUSR1) w_.At(w_.Elapsed() + seconds(3), [&] { w_.checkpoints.Write(200); });
  };
  w_.At(seconds(5), [&] { w_.checkpoints.Write(100); });
  std::optional<Clock::MonoTime> urgent_before_notice;
  w_.At(seconds(29), [&] { urgent_before_notice = w_.checkpoints.urgent_since; });
  w_.At(seconds(30), [&] { w_.imds.PostNotice(seconds(120)); });
  const Clock::MonoTime start = w_.clock.Monotonic();
  const AgentResult r = Run();
  EXPECT_EQ(r.exit_code, kExitInterrupted);
  // The answer is taken without the whole settle time once the job ends.
  EXPECT_FALSE(urgent_before_notice.has_value());
  ASSERT_TRUE(w_.checkpoints.urgent_since.has_value());
  EXPECT_GE(*w_.checkpoints.urgent_since - start, seconds(30));
  ASSERT_EQ(w_.launcher.launches.size(), 1u);
  // Step 100 is not due for a periodic upload (60 s): only the answer goes up.
  ASSERT_EQ(w_.uploader.committed.size(), 1u);
  EXPECT_EQ(w_.uploader.committed[0].step, 200);
  EXPECT_EQ(w_.signals, (std::vector<int>{SIGUSR1, SIGTERM}));
  // From the notice being read: 3 s for the checkpoint, 1 s to upload, and ticks.
  ASSERT_GE(r.notice_to_commit_seconds, 4.0);
  EXPECT_LE(r.notice_to_commit_seconds, 5.5);
  EXPECT_TRUE(std::filesystem::exists(NoticeFilePath(config_)));
  // With the ledger's moments (docs/operations.md, "The ledger").
  EXPECT_EQ(Events(), (std::vector<std::string>{"agent-start", "checkpoint-answer",
                                                "checkpoint-request", "exit", "lease", "notice",
                                                "restore-end", "restore-start", "snapshot", "start",
                                                "stop", "trainer-stop"}));
  EXPECT_NE(Lease().find("\"released\":true"), std::string::npos) << Lease();
}

// Logs (docs/design.md §13): shipped every log_ship_interval while the job
// trains, not at all between the notice and the final commit, and once more
// after it, so the commit's own line is in the store.
TEST_F(AgentLoopTest, LogsAreShippedOnScheduleButNotBeforeTheFinalSnapshotIsCommitted) {
  InitLogging(LogLevel::kInfo, LogFormat::kText);  // the logger the tap is part of
  flags_["log_ship_interval"] = "10s";
  w_.uploader.script = {{seconds(20), Status::Ok(), false}};  // the final upload: 20 s
  w_.on_signal = [&](int signo) {
    if (signo == SIGUSR1) w_.At(w_.Elapsed() + seconds(1), [&] { w_.checkpoints.Write(200); });
  };
  auto segments = [&] {
    auto listed = ListAll(*store_, "job/logs/");
    EXPECT_TRUE(listed.ok());
    return listed.ok() ? listed->size() : 0;
  };
  size_t at_notice = 0, during_upload = 0;
  bool upload_pending = false;
  w_.At(seconds(35), [&] {
    at_notice = segments();
    w_.imds.PostNotice(seconds(120));
  });
  // Without the pause, shipments at about 40 s and 50 s would put the
  // notice's lines up while the final snapshot is still on its way.
  w_.At(seconds(55), [&] {
    during_upload = segments();
    upload_pending = w_.uploader.busy() && w_.uploader.committed.empty();
  });
  const AgentResult r = Run();
  EXPECT_EQ(r.exit_code, kExitInterrupted);
  EXPECT_GE(at_notice, 1u);  // shipped on schedule before
  EXPECT_TRUE(upload_pending);
  EXPECT_EQ(during_upload, at_notice);
  auto listed = ListAll(*store_, "job/logs/");
  ASSERT_TRUE(listed.ok());
  ASSERT_GT(listed->size(), at_notice);  // the last shipment, after the commit
  auto last = store_->Get(listed->back().key);
  ASSERT_TRUE(last.ok());
  auto text = DecodeSizedFrame(*last, 1 << 20);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find(" agent info snapshot 0000000001 committed"), std::string::npos) << *text;
}

// The exit meets the deadline: the last log shipment gets what is left of
// it, less a second, and nothing once it has passed.
TEST_F(AgentLoopTest, NoLogShipmentDelaysAnExitPastTheDeadline) {
  InitLogging(LogLevel::kInfo, LogFormat::kText);  // the logger the tap is part of
  flags_["log_ship_interval"] = "10s";
  auto segments = [&] {
    auto listed = ListAll(*store_, "job/logs/");
    EXPECT_TRUE(listed.ok());
    return listed.ok() ? listed->size() : 0;
  };
  size_t at_notice = 0;
  w_.At(seconds(35), [&] {
    at_notice = segments();
    w_.imds.PostNotice(-seconds(1));  // read after its deadline (a slow poll, a hung host)
  });
  const AgentResult r = Run();
  EXPECT_NE(r.exit_code, kExitOk);
  EXPECT_GE(at_notice, 1u);  // shipped on schedule before
  EXPECT_EQ(segments(), at_notice) << "a shipment after the deadline";
}

TEST_F(AgentLoopTest, AnUploadFailingInTheMiddleOfANoticeIsTriedAgain) {
  w_.uploader.script = {{seconds(2), Status::IOError("connection reset by peer")}};
  w_.on_signal = [&](int signo) {
    if (signo == SIGUSR1) w_.At(w_.Elapsed() + seconds(1), [&] { w_.checkpoints.Write(300); });
  };
  w_.At(seconds(10), [&] { w_.imds.PostNotice(seconds(120)); });
  const AgentResult r = Run();
  EXPECT_EQ(r.exit_code, kExitInterrupted);
  ASSERT_EQ(w_.uploader.started.size(), 2u);
  ASSERT_EQ(w_.uploader.committed.size(), 1u);
  EXPECT_EQ(w_.uploader.committed[0].step, 300);
  EXPECT_EQ(r.committed_step, 300);
}

TEST_F(AgentLoopTest, AStoreThatNeverAnswersTheFinalUploadStillStopsTheTrainerInTime) {
  w_.uploader.script = {{seconds(1), Status::Ok(), /*hangs=*/true}};
  w_.on_signal = [&](int signo) {
    if (signo == SIGUSR1) w_.At(w_.Elapsed() + seconds(1), [&] { w_.checkpoints.Write(300); });
  };
  w_.At(seconds(10), [&] { w_.imds.PostNotice(seconds(120)); });
  const AgentResult r = Run();
  EXPECT_EQ(r.exit_code, kExitNotCommitted);
  EXPECT_TRUE(r.abandoned);
  EXPECT_TRUE(w_.uploader.committed.empty());
  EXPECT_EQ(w_.signals, (std::vector<int>{SIGUSR1, SIGTERM}));
  // Given up 10 s before the deadline (130 s), the stop following at once.
  EXPECT_GE(w_.Elapsed(), seconds(120));
  EXPECT_LT(w_.Elapsed(), seconds(122));
}

TEST_F(AgentLoopTest, ALostLeaseStopsTheTrainerCommitsNothingAndExits4) {
  w_.At(seconds(5), [&] { w_.checkpoints.Write(100); });
  // A successor takes the job: the lease object is replaced under us.
  w_.At(seconds(7), [&] {
    ASSERT_TRUE(
        store_->Put("job/lease", R"({"instance":"i-successor","generation":9})", PutCondition{})
            .ok());
  });
  w_.At(seconds(61), [&] { w_.checkpoints.Write(200); });
  const AgentResult r = Run();
  EXPECT_EQ(r.exit_code, kExitFenced);
  EXPECT_TRUE(w_.uploader.started.empty());
  EXPECT_EQ(w_.signals, std::vector<int>{SIGTERM});
  EXPECT_EQ(Events(), (std::vector<std::string>{"agent-start", "exit", "fenced", "lease",
                                                "restore-end", "restore-start", "start",
                                                "trainer-stop"}));
  // The successor's lease is left as it is.
  EXPECT_NE(Lease().find("i-successor"), std::string::npos);
}

TEST_F(AgentLoopTest, CompletionUploadsTheLastCheckpointMarksTheJobAndScalesToZero) {
  flags_["on_complete"] = "scale-to-zero";
  w_.At(seconds(5), [&] { w_.checkpoints.Write(100); });
  w_.At(seconds(8), [&] { w_.checkpoints.Write(150); });
  w_.At(seconds(9), [&] { w_.launcher.trainer->Exit(ExitStatus{}); });
  const AgentResult r = Run();
  EXPECT_EQ(r.exit_code, kExitOk);
  ASSERT_EQ(w_.uploader.committed.size(), 1u);
  EXPECT_EQ(w_.uploader.committed[0].step, 150);
  auto marker = store_->Get("job/complete");
  ASSERT_TRUE(marker.ok());
  EXPECT_NE(marker->find("\"step\":150"), std::string::npos) << *marker;
  EXPECT_EQ(w_.autoscaling.calls,
            (std::vector<std::string>{"Describe i-test", "Update asg-1 min=0 desired=0"}));
  EXPECT_EQ(Events(), (std::vector<std::string>{"agent-start", "complete", "exit", "lease",
                                                "restore-end", "restore-start", "scale-to-zero",
                                                "snapshot", "start", "trainer-exit"}));
}

TEST_F(AgentLoopTest, CrashesRestartAfterTheBackoffFromTheNewestCheckpointThenTheJobFails) {
  w_.At(seconds(2), [&] { w_.checkpoints.Write(10); });
  // Each trainer crashes: the first at 3 s, restarted after 5 s; the second
  // at 9 s, restarted after 8 s (10 s capped); the third at 18 s.
  for (int at : {3, 9, 18}) {
    w_.At(seconds(at), [&] { w_.launcher.trainer->Exit(ExitStatus{.code = 1}); });
  }
  const AgentResult r = Run();
  EXPECT_EQ(r.exit_code, kExitFailure);
  ASSERT_EQ(w_.launcher.launches.size(), 3u);
  EXPECT_EQ(w_.launcher.launches[1].attempt, 2);
  EXPECT_EQ(w_.launcher.launches[1].resume, dir_.Join("ckpt") + "/step_10.pt");
  EXPECT_EQ(w_.launcher.launches[2].attempt, 3);
  EXPECT_EQ(Events(), (std::vector<std::string>{"agent-start", "crash", "crash", "crash", "exit",
                                                "failed", "lease", "restore-end", "restore-start",
                                                "start", "trainer-start", "trainer-start"}));
  EXPECT_NE(Lease().find("\"released\":true"), std::string::npos);
}

TEST_F(AgentLoopTest, SigtermTakesALastSnapshotAndStopsTheTrainer) {
  w_.on_signal = [&](int signo) {
    if (signo == SIGUSR1) w_.At(w_.Elapsed() + seconds(2), [&] { w_.checkpoints.Write(70); });
  };
  w_.At(seconds(20), [&] { w_.stop_requested = true; });
  const AgentResult r = Run();
  EXPECT_EQ(r.exit_code, kExitInterrupted);
  ASSERT_EQ(w_.uploader.committed.size(), 1u);
  EXPECT_EQ(w_.uploader.committed[0].step, 70);
  EXPECT_EQ(w_.signals, (std::vector<int>{SIGUSR1, SIGTERM}));
  EXPECT_EQ(Events(), (std::vector<std::string>{"agent-start", "checkpoint-answer",
                                                "checkpoint-request", "exit", "lease",
                                                "restore-end", "restore-start", "snapshot", "start",
                                                "stop", "trainer-stop"}));
}

TEST_F(AgentLoopTest, ANoticeCompletesTheLifecycleHookOnceTheTrainerIsStopped) {
  flags_["lifecycle_hook"] = "drain";
  flags_["checkpoint_signal"] = "none";
  w_.At(seconds(2), [&] { w_.checkpoints.Write(40); });
  w_.At(seconds(3), [&] { w_.imds.PostNotice(seconds(120)); });
  const AgentResult r = Run();
  EXPECT_EQ(r.exit_code, kExitInterrupted);
  ASSERT_EQ(w_.uploader.committed.size(), 1u);
  EXPECT_EQ(w_.autoscaling.calls,
            (std::vector<std::string>{"Describe i-test", "Complete asg-1 drain i-test"}));
  EXPECT_EQ(Events(), (std::vector<std::string>{"agent-start", "checkpoint-answer",
                                                "checkpoint-request", "exit", "lease",
                                                "lifecycle-complete", "notice", "restore-end",
                                                "restore-start", "snapshot", "start", "stop",
                                                "trainer-stop"}));
}

// The metadata service is read from the agent's first moment, not only once
// the trainer runs (docs/design.md §9, "The start"): a notice already posted
// when the agent starts ends the job before any trainer is started, with
// the lease released, and exit 75 (nothing was lost).
TEST_F(AgentLoopTest, ANoticeBeforeTheTrainerStartsEndsTheJobWithoutStartingIt) {
  w_.imds.PostNotice(seconds(110));
  const AgentResult r = Run();
  EXPECT_EQ(r.exit_code, kExitInterrupted);
  EXPECT_TRUE(w_.launcher.launches.empty()) << "no trainer was started";
  EXPECT_TRUE(w_.uploader.committed.empty());
  EXPECT_EQ(Events(), (std::vector<std::string>{"agent-start", "exit", "stop"}));
  EXPECT_NE(Lease().find("\"released\":true"), std::string::npos) << Lease();
}

// The fall back from a snapshot the trainer cannot resume from restores the
// older snapshot off the loop (docs/design.md §9): while its reads wait for
// the store, the loop goes on turning (the watchdog, the signals, the
// notices), and the policy hears of the exit, which decides the restart, only
// once the older snapshot is in place.
// Before, the restore ran on the loop's thread: a snapshot of many gigabytes
// held WATCHDOG=1 past systemd's limit, and SIGTERM was not read.
TEST_F(AgentLoopTest, AFallBackRestoresTheOlderSnapshotOffTheLoop) {
  std::filesystem::remove_all(dir_.Join("ckpt"));
  for (int64_t step : {10, 20}) {  // seq 1 resumes from step_10.pt, seq 2 from step_20.pt
    const std::string src = dir_.Join("src-" + std::to_string(step));
    const std::string name = "step_" + std::to_string(step) + ".pt";
    WriteTree(src, {{name, {"weights of step " + std::to_string(step)}}});
    auto capture = CaptureTree(src, step, name);
    ASSERT_TRUE(capture.ok()) << capture.status().ToString();
    SnapshotRequest request;
    request.job = "job";
    request.instance = "i-test";
    auto r = SnapshotWriter(*store_, w_.clock, SnapshotOptions{}).Write(*capture, request);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  flags_["resume.max_failures"] = "2";
  // One restart in all: the older snapshot's whole budget comes before the
  // exit that decides the restart, as when the fall back ran at once.
  flags_["restart.max"] = "1";
  FaultyStore faulty(*store_);
  faulty.HoldCallsOf("snapshots/0000000001/files/");  // the older snapshot's data
  // Runs from seq 2 crash twice, writing nothing newer: the fall back to seq 1,
  // held for 100 turns (10 s), longer than the restart's backoff (8 s). The
  // trainers are driven by their launches, not by the fake time: with the
  // store work on threads, the start takes real time.
  int turns_while_held = 0;
  size_t ended = 0;  // launches whose trainer was made to exit (the loop owns each)
  std::atomic<bool> done{false};
  // Only the failure path waits on this: with the restore on the loop's
  // thread, no turn comes while it is held, and this lets it go after 10 s,
  // before the exit's 15 s wait for a fall back would give up on it.
  std::thread release([&] {
    for (int i = 0; i < 1000 && !done; ++i) std::this_thread::sleep_for(milliseconds(10));
    faulty.ReleaseCalls();
  });
  const AgentResult r = Run(&faulty, [&](AgentPorts& ports) {
    ports.inline_store_work = false;  // the fall back on a thread of its own
    ports.idle = [&](milliseconds d) {
      if (faulty.held() > 0 && ++turns_while_held == 100) faulty.ReleaseCalls();
      // Runs 1 and 2 crash; run 3 (from seq 1) finishes the job. The newest
      // trainer is alive until it was made to exit and the loop saw it.
      if (w_.launcher.launches.size() > ended) {
        ended = w_.launcher.launches.size();
        w_.launcher.trainer->Exit(ExitStatus{.code = ended < 3 ? 1 : 0});
      }
      std::this_thread::sleep_for(milliseconds(1));  // the threads' work, in real time
      w_.Idle(d);
    };
  });
  done = true;
  release.join();
  EXPECT_GE(turns_while_held, 100) << "the loop stood still while the fall back restored";
  EXPECT_EQ(r.exit_code, kExitOk);
  ASSERT_EQ(w_.launcher.launches.size(), 3u);
  EXPECT_EQ(w_.launcher.launches[0].resume, dir_.Join("ckpt") + "/step_20.pt");
  EXPECT_EQ(w_.launcher.launches[2].resume, dir_.Join("ckpt") + "/step_10.pt")
      << "the restart waited for the older snapshot";
  EXPECT_TRUE(std::filesystem::exists(dir_.Join("ckpt") + "/step_10.pt"));
  const std::vector<std::string> events = Events();
  EXPECT_NE(std::find(events.begin(), events.end(), "fallback"), events.end());
  EXPECT_NE(std::find(events.begin(), events.end(), "suspect"), events.end());
}

// The job's end on the store and on Auto Scaling (the complete marker, then
// on_complete) goes to the ordered queue, off the loop (docs/design.md §9):
// a marker PUT that hangs holds neither the loop nor its exit past the
// exit's bound, and on_complete still comes only after the marker.
TEST_F(AgentLoopTest, AHangingCompleteMarkerHoldsNeitherTheLoopNorOnComplete) {
  flags_["on_complete"] = "scale-to-zero";
  const std::string metrics = dir_.Join("metrics.prom");
  flags_["metrics_file"] = metrics;
  FaultyStore faulty(*store_);
  faulty.HoldCallsOf("job/complete");
  // The marker is let go once the loop has reached its end (its last
  // metrics say "done"); only the failure path waits out the 20 s.
  std::atomic<bool> done_seen{false};
  std::thread release([&] {
    for (int i = 0; i < 2000 && !done_seen; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
      auto text = ReadFileToString(metrics);
      done_seen = text.ok() && text->find("phase=\"done\"} 1") != std::string::npos;
    }
    faulty.ReleaseCalls();
  });
  std::vector<std::string> calls_while_held;
  int turns_trained = 0;
  const AgentResult r = Run(&faulty, [&](AgentPorts& ports) {
    ports.inline_store_work = false;  // the queue on a thread of its own
    ports.idle = [&](milliseconds d) {
      if (faulty.held() > 0) calls_while_held = w_.autoscaling.calls;
      // Driven by the trainer's launch, not by the fake time: with the store
      // work on threads, the start takes real time.
      // The one trainer lives until it was made to exit (turn 40).
      if (!w_.launcher.launches.empty() && turns_trained < 40) {
        if (++turns_trained == 20) w_.checkpoints.Write(100);
        if (turns_trained == 40) w_.launcher.trainer->Exit(ExitStatus{});
      }
      w_.Idle(d);
    };
  });
  release.join();
  EXPECT_TRUE(done_seen) << "the loop stood still while the marker's PUT hung";
  EXPECT_EQ(r.exit_code, kExitOk);
  EXPECT_TRUE(calls_while_held.empty()) << "on_complete came before the marker";
  EXPECT_TRUE(store_->Get("job/complete").ok());
  EXPECT_EQ(w_.autoscaling.calls,
            (std::vector<std::string>{"Describe i-test", "Update asg-1 min=0 desired=0"}));
}

}  // namespace
}  // namespace sg::testing
