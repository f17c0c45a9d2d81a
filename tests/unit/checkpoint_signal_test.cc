// Where checkpoint_signal goes (agent/trainer/checkpoint_signal.h): to the trainer,
// or to its workers when the trainer is a known launcher.
#include "agent/trainer/checkpoint_signal.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace sg {
namespace {

TEST(CheckpointSignalTarget, TorchrunAndTorchsRunModulesAreLaunchers) {
  EXPECT_EQ(CheckpointSignalTarget({"torchrun", "--nnodes", "2", "train.py"}),
            SignalTarget::kWorkers);
  EXPECT_EQ(CheckpointSignalTarget({"/usr/local/bin/torchrun", "train.py"}),
            SignalTarget::kWorkers);
  EXPECT_EQ(CheckpointSignalTarget({"python3", "-m", "torch.distributed.run", "train.py"}),
            SignalTarget::kWorkers);
  EXPECT_EQ(CheckpointSignalTarget({"/usr/bin/python3", "-u", "-m", "torch.distributed.launch"}),
            SignalTarget::kWorkers);
  EXPECT_EQ(CheckpointSignalTarget({"python", "-mtorch.distributed.run", "train.py"}),
            SignalTarget::kWorkers);
}

TEST(CheckpointSignalTarget, AnythingElseIsTheTrainerItself) {
  EXPECT_EQ(CheckpointSignalTarget({"python3", "train.py", "-m", "torch.distributed.run"}),
            SignalTarget::kTrainer);
  EXPECT_EQ(CheckpointSignalTarget({"python3", "-m", "mypackage.train"}), SignalTarget::kTrainer);
  EXPECT_EQ(CheckpointSignalTarget({"sh", "-c", "torchrun train.py"}), SignalTarget::kTrainer);
  EXPECT_EQ(CheckpointSignalTarget({"./torchrun-wrapper"}), SignalTarget::kTrainer);
  EXPECT_EQ(CheckpointSignalTarget({}), SignalTarget::kTrainer);
}

class TwoWayTrainer final : public Trainer {
 public:
  bool running() const override { return true; }
  std::optional<ExitStatus> Poll() override { return std::nullopt; }
  Status Signal(int signo) override {
    trainer.push_back(signo);
    return Status::Ok();
  }
  Status SignalWorkers(int signo) override {
    workers.push_back(signo);
    return Status::Ok();
  }
  StatusOr<ExitStatus> Stop(int, std::chrono::milliseconds) override { return ExitStatus{}; }
  std::vector<int> trainer, workers;
};

TEST(SendCheckpointSignal, GoesWhereTheTargetSays) {
  TwoWayTrainer t;
  ASSERT_TRUE(SendCheckpointSignal(t, SIGUSR1, SignalTarget::kTrainer).ok());
  ASSERT_TRUE(SendCheckpointSignal(t, SIGUSR2, SignalTarget::kWorkers).ok());
  EXPECT_EQ(t.trainer, std::vector<int>{SIGUSR1});
  EXPECT_EQ(t.workers, std::vector<int>{SIGUSR2});
}

}  // namespace
}  // namespace sg
