// The group agent's watch (agent/group/group_watch.h), driven turn by turn with a
// fake clock, a fake metadata service and a fake trainer: what it does at
// once on a notice or a stop signal, and its backstops when the loop is held
// by the store.
#include "agent/group/group_watch.h"

#include <gtest/gtest.h>
#include <signal.h>

#include "agent/config/exit_codes.h"
#include "common/files.h"
#include "tests/support/agent_fakes.h"
#include "tests/support/fake_clock.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

using namespace std::chrono_literals;

class RecordingTrainer final : public Trainer {
 public:
  bool running() const override { return !stopped; }
  std::optional<ExitStatus> Poll() override { return std::nullopt; }
  Status Signal(int signo) override {
    signals.push_back(signo);
    return Status::Ok();
  }
  Status SignalWorkers(int signo) override {
    worker_signals.push_back(signo);
    return Status::Ok();
  }
  StatusOr<ExitStatus> Stop(int signo, std::chrono::milliseconds grace) override {
    stops.emplace_back(signo, grace);
    stopped = true;
    return ExitStatus{};
  }
  std::vector<int> signals, worker_signals;
  std::vector<std::pair<int, std::chrono::milliseconds>> stops;
  bool stopped = false;
};

class GroupWatchTest : public ::testing::Test {
 protected:
  GroupWatchTest() : imds_(clock_), monitor_(imds_, clock_, {}) {
    auto t = std::make_unique<RecordingTrainer>();
    trainer_ = t.get();
    shared_ = std::make_unique<SharedTrainer>(std::move(t), slot_);
    options_.notice_file = dir_.Join("notice");
    options_.checkpoint_signal = SIGUSR1;
    options_.signal_target = SignalTarget::kWorkers;  // as under torchrun
    options_.stop_signal = SIGTERM;
    options_.stop_grace = 5s;
    options_.stop_timeout = 60s;
    options_.poll_interval = 1s;
  }
  std::unique_ptr<GroupWatch> Watch(bool with_monitor) {
    return std::make_unique<GroupWatch>(options_, clock_, with_monitor ? &monitor_ : nullptr, -1,
                                        slot_, [this](int code) { exits_.push_back(code); });
  }

  FakeClock clock_;
  FakeMetadata imds_;
  InterruptionMonitor monitor_;
  TempDir dir_;
  SharedTrainer::Slot slot_;
  RecordingTrainer* trainer_ = nullptr;
  std::unique_ptr<SharedTrainer> shared_;
  GroupWatchOptions options_;
  std::vector<int> exits_;
};

TEST_F(GroupWatchTest, ANoticeAsksTheTrainerAtOnceAndIsHandedToTheLoop) {
  auto watch = Watch(true);
  watch->SetRound(3);
  watch->Turn(false);
  EXPECT_TRUE(trainer_->worker_signals.empty());
  EXPECT_FALSE(watch->asked_at().has_value());

  imds_.PostNotice(120s);
  clock_.Advance(1s);
  watch->Turn(false);
  // Asked without the loop: the checkpoint signal to the workers, the notice file.
  EXPECT_EQ(trainer_->worker_signals, std::vector<int>{SIGUSR1});
  auto notice = ReadFileToString(options_.notice_file);
  ASSERT_TRUE(notice.ok());
  EXPECT_NE(notice->find("\"round\":3"), std::string::npos) << *notice;
  // One format with one node's (agent/run/notice_file.h): the notice's own JSON.
  EXPECT_EQ(notice->rfind("{\"kind\":\"notice\",\"action\":\"terminate\",", 0), 0u) << *notice;
  ASSERT_TRUE(watch->asked_at().has_value());
  EXPECT_EQ(*watch->asked_at(), clock_.Now());
  // The loop takes the notice once.
  GroupWatch::News news = watch->Take();
  ASSERT_EQ(news.notices.size(), 1u);
  EXPECT_FALSE(news.stop_signal);
  EXPECT_TRUE(watch->Take().notices.empty());
  // A later poll of the same notice asks nothing again.
  clock_.Advance(1s);
  watch->Turn(false);
  EXPECT_EQ(trainer_->worker_signals.size(), 1u);
  EXPECT_TRUE(exits_.empty());
}

TEST_F(GroupWatchTest, ALoopHeldByTheStoreHasTheTrainerStoppedAndTheProcessEndedBeforeTheDeadline) {
  auto watch = Watch(true);
  imds_.PostNotice(30s);
  watch->Turn(false);
  ASSERT_TRUE(watch->deadline().has_value());
  EXPECT_EQ(*watch->deadline(), clock_.Monotonic() + 30s);
  // The loop has until 10 s before the deadline, and 2 s more, to stop the trainer.
  clock_.Advance(21s);
  watch->Turn(false);
  EXPECT_TRUE(trainer_->stops.empty());
  clock_.Advance(1s);
  watch->Turn(false);
  ASSERT_EQ(trainer_->stops.size(), 1u);
  EXPECT_EQ(trainer_->stops[0].first, SIGTERM);
  EXPECT_EQ(trainer_->stops[0].second, 5s);  // the grace; 7 s are left before the exit
  EXPECT_TRUE(exits_.empty());
  // A second before the deadline the process ends: 74, nothing was committed.
  clock_.Advance(6s);
  watch->Turn(false);
  EXPECT_TRUE(exits_.empty());
  clock_.Advance(1s);
  watch->Turn(false);
  EXPECT_EQ(exits_, std::vector<int>{kExitNotCommitted});
}

TEST_F(GroupWatchTest, ALoopThatStopsTheTrainerItselfIsLeftToItAndItsExitCodeIsKept) {
  auto watch = Watch(false);
  watch->Turn(true);  // SIGTERM: the deadline is stop_timeout away
  EXPECT_TRUE(watch->Take().stop_signal);
  EXPECT_EQ(trainer_->worker_signals, std::vector<int>{SIGUSR1});
  ASSERT_TRUE(watch->deadline().has_value());
  EXPECT_EQ(*watch->deadline(), clock_.Monotonic() + 60s);
  watch->LoopStopsTrainer();
  watch->SetExitCode(kExitInterrupted);
  clock_.Advance(58s);
  watch->Turn(false);
  EXPECT_TRUE(trainer_->stops.empty());
  EXPECT_TRUE(exits_.empty());
  // The loop's own exit hangs on the store: the code it chose is the one used.
  clock_.Advance(1s);
  watch->Turn(false);
  EXPECT_EQ(exits_, std::vector<int>{kExitInterrupted});
}

TEST_F(GroupWatchTest, WithoutATrainerOrWithoutACheckpointSignalNothingIsSignalled) {
  options_.checkpoint_signal.reset();
  auto watch = Watch(false);
  watch->Turn(true);
  EXPECT_TRUE(trainer_->worker_signals.empty());
  EXPECT_TRUE(ReadFileToString(options_.notice_file).ok());  // the notice file still asks
  // The loop ended its trainer: the watch's backstop finds none to stop.
  shared_.reset();
  clock_.Advance(52s);
  watch->Turn(false);
  EXPECT_TRUE(exits_.empty());
}

// A trainer that is no launcher gets checkpoint_signal itself (its whole
// process group), as with one node (agent/trainer/checkpoint_signal.h).
TEST_F(GroupWatchTest, APlainTrainerGetsTheCheckpointSignalItself) {
  options_.signal_target = SignalTarget::kTrainer;
  auto watch = Watch(true);
  imds_.PostNotice(120s);
  watch->Turn(false);
  EXPECT_EQ(trainer_->signals, std::vector<int>{SIGUSR1});
  EXPECT_TRUE(trainer_->worker_signals.empty());
}

// A rebalance recommendation is handed to the loop, which decides
// (on_rebalance); the watch neither asks the trainer nor sets a deadline.
TEST_F(GroupWatchTest, ARebalanceIsHandedToTheLoopAlone) {
  auto watch = Watch(true);
  imds_.PostRebalance();
  watch->Turn(false);
  GroupWatch::News news = watch->Take();
  ASSERT_EQ(news.others.size(), 1u);
  EXPECT_EQ(news.others[0].kind, InterruptionEvent::Kind::kRebalance);
  EXPECT_TRUE(news.notices.empty());
  EXPECT_TRUE(trainer_->signals.empty());
  EXPECT_TRUE(trainer_->worker_signals.empty());
  EXPECT_FALSE(watch->deadline().has_value());
}

}  // namespace
}  // namespace sg::testing
