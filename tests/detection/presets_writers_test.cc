// Every preset against a writer process that writes the way its framework
// does (tests/tools/writers/), watched by the real CheckpointWatcher: which
// checkpoint is taken at each point of the write, and what resume path the
// trainer would get.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "agent/detect/checkpoint_watcher.h"
#include "agent/detect/presets.h"
#include "common/clock.h"
#include "tests/detection/writer_process.h"
#include "tests/support/pausable_clock.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kSettle(300);

class PresetWriterTest : public ::testing::Test {
 protected:
  void Watch(Preset preset, std::vector<std::string> patterns = {}) {
    dir_ = tmp_.Join("ckpt");
    std::filesystem::create_directories(dir_);
    detector_.emplace(dir_, preset, std::move(patterns));
    auto w = CheckpointWatcher::Start(dir_, kSettle, clock_);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    watcher_ = std::move(*w);
  }

  std::vector<std::string> Dir(std::vector<std::string> args) {
    args.insert(args.begin(), {"--dir", dir_});
    return args;
  }

  // The complete checkpoints right now.
  std::vector<Checkpoint> Now() {
    auto r = watcher_->CompleteCheckpoints(*detector_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<Checkpoint>{};
  }

  // The complete checkpoints once everything written so far has had more
  // than the settle time to settle.
  std::vector<Checkpoint> Look() {
    std::this_thread::sleep_for(kSettle + milliseconds(150));
    return Now();
  }

  static std::vector<std::string> Ids(const std::vector<Checkpoint>& cs) {
    std::vector<std::string> ids;
    for (const Checkpoint& c : cs) ids.push_back(c.id);
    return ids;
  }

  // The chosen (newest) checkpoint, with its resume path and step.
  static void ExpectChosen(const std::vector<Checkpoint>& cs, const std::string& id,
                           const std::string& resume, std::optional<int64_t> step) {
    ASSERT_FALSE(cs.empty()) << "no complete checkpoint; expected " << id;
    EXPECT_EQ(cs[0].id, id) << ::testing::PrintToString(Ids(cs));
    EXPECT_EQ(cs[0].resume, resume);
    EXPECT_EQ(cs[0].step, step);
  }

  // The watcher's clock. Checks that something has "not settled yet" pause it
  // before the write they look at, so that a slow machine (more than kSettle
  // between the write and the check) cannot make the write look settled.
  PausableClock clock_;
  TempDir tmp_;
  std::string dir_;
  std::optional<CheckpointDetector> detector_;
  std::unique_ptr<CheckpointWatcher> watcher_;
};

// --- caffe -----------------------------------------------------------------

TEST_F(PresetWriterTest, CaffeTakesAnIterationOnlyOnceItsSolverstateIsClosed) {
  Watch(Preset::kCaffe);
  WriterProcess w("caffe_writer.py", Dir({"--iters", "100,200"}),
                  {"mid-model-200", "after-model-200", "mid-state-200"});
  for (const char* hold : {"mid-model-200", "after-model-200", "mid-state-200"}) {
    ASSERT_TRUE(w.WaitAt(hold));
    ExpectChosen(Look(), "snap_iter_100", "snap_iter_100.solverstate", 100);
    w.Release(hold);
  }
  ASSERT_TRUE(w.WaitDone());
  auto cs = Look();
  ExpectChosen(cs, "snap_iter_200", "snap_iter_200.solverstate", 200);
  EXPECT_EQ(cs[0].relpaths,
            (std::vector<std::string>{"snap_iter_200.caffemodel", "snap_iter_200.solverstate"}));
}

TEST_F(PresetWriterTest, CaffeHdf5SnapshotsUnderASubdirectoryResumeFromTheH5Solverstate) {
  Watch(Preset::kCaffe);
  RunWriter("caffe_writer.py",
            Dir({"--iters", "500,1000", "--format", "hdf5", "--prefix", "snapshots/net"}));
  auto cs = Look();
  ExpectChosen(cs, "snapshots/net_iter_1000", "snapshots/net_iter_1000.solverstate.h5", 1000);
  EXPECT_EQ(cs[0].relpaths, (std::vector<std::string>{"snapshots/net_iter_1000.caffemodel.h5",
                                                      "snapshots/net_iter_1000.solverstate.h5"}));
  EXPECT_EQ(Ids(cs),
            (std::vector<std::string>{"snapshots/net_iter_1000", "snapshots/net_iter_500"}));
}

TEST_F(PresetWriterTest, CaffeSecondSnapshotOfAnIterationDoesNotPairWithTheOldSolverstate) {
  Watch(Preset::kCaffe);
  // The second snapshot of iteration 100 rewrites the model in place; until
  // its solverstate follows, the pair on disk is torn.
  WriterProcess w("caffe_writer.py", Dir({"--iters", "100,100", "--chunk-delay", "0.01"}),
                  {"after-state-100", "after-model-100-1"});
  ASSERT_TRUE(w.WaitAt("after-state-100"));
  auto first = Look();
  ExpectChosen(first, "snap_iter_100", "snap_iter_100.solverstate", 100);
  w.Release("after-state-100");
  ASSERT_TRUE(w.WaitAt("after-model-100-1"));
  EXPECT_TRUE(Look().empty());
  w.Release("after-model-100-1");
  ASSERT_TRUE(w.WaitDone());
  auto second = Look();
  ExpectChosen(second, "snap_iter_100", "snap_iter_100.solverstate", 100);
  EXPECT_GT(second[0].newest_mtime, first[0].newest_mtime);
}

// --- pytorch / generic --------------------------------------------------------

TEST_F(PresetWriterTest, PytorchFileWrittenInPlaceIsTakenOnceClosedAndSettled) {
  Watch(Preset::kPytorch, {"*.pt", "*.pth"});
  WriterProcess w("torch_writer.py", Dir({"--steps", "100,200"}), {"mid-200"});
  ASSERT_TRUE(w.WaitAt("mid-200"));
  // Open for writing, however long it has been quiet.
  ExpectChosen(Look(), "step_100.pt", "step_100.pt", 100);
  clock_.Pause();
  w.Release("mid-200");
  ASSERT_TRUE(w.WaitDone());
  ExpectChosen(Now(), "step_100.pt", "step_100.pt", 100);  // closed, not settled yet
  clock_.Resume();
  ExpectChosen(Look(), "step_200.pt", "step_200.pt", 200);
}

TEST_F(PresetWriterTest, PytorchTemporaryNameIsNotACheckpointUntilRenamedIn) {
  Watch(Preset::kPytorch, {"*.pt"});
  WriterProcess w("torch_writer.py", Dir({"--steps", "1,2", "--style", "rename"}),
                  {"before-rename-2"});
  ASSERT_TRUE(w.WaitAt("before-rename-2"));
  EXPECT_EQ(Ids(Look()), (std::vector<std::string>{"step_1.pt"}));
  w.Release("before-rename-2");
  ASSERT_TRUE(w.WaitDone());
  ExpectChosen(Look(), "step_2.pt", "step_2.pt", 2);
}

TEST_F(PresetWriterTest, PytorchWriterThatClosesAndReopensIsNotTakenBetween) {
  Watch(Preset::kPytorch, {"*.pt"});
  clock_.Pause();
  WriterProcess w("torch_writer.py", Dir({"--steps", "7", "--style", "reopen", "--gap", "0.1"}),
                  {"reopen-gap-7"});
  ASSERT_TRUE(w.WaitAt("reopen-gap-7"));
  EXPECT_TRUE(Now().empty());  // closed once, but not settled
  clock_.Resume();
  w.Release("reopen-gap-7");
  ASSERT_TRUE(w.WaitDone());
  ExpectChosen(Look(), "step_7.pt", "step_7.pt", 7);
  EXPECT_EQ(std::filesystem::file_size(dir_ + "/step_7.pt"), 64u * 1024);
}

TEST_F(PresetWriterTest, PytorchFilesInAStepDirectoryFormOneCheckpoint) {
  Watch(Preset::kPytorch, {"*.pt"});
  RunWriter("torch_writer.py", Dir({"--steps", "200,300", "--name", "run/step_{step}/model.pt"}));
  RunWriter("torch_writer.py", Dir({"--steps", "200,300", "--name", "run/step_{step}/optim.pt"}));
  auto cs = Look();
  ExpectChosen(cs, "run/step_300", "run/step_300", 300);
  EXPECT_EQ(cs[0].relpaths,
            (std::vector<std::string>{"run/step_300/model.pt", "run/step_300/optim.pt"}));
}

TEST_F(PresetWriterTest, GenericEpochStepNamesAreOrderedByStep) {
  Watch(Preset::kGeneric, {"*.pt"});
  RunWriter("torch_writer.py",
            Dir({"--steps", "1000,900", "--name", "epoch={epoch}-step={step}.pt"}));
  // step 900 was written last but step 1000 is the later state.
  ExpectChosen(Look(), "epoch=10-step=1000.pt", "epoch=10-step=1000.pt", 1000);
}

// --- lightning -------------------------------------------------------------

TEST_F(PresetWriterTest, LightningLastCkptIsTheNewestStateEvenWhenTopkDidNotImprove) {
  Watch(Preset::kLightning, {"*.ckpt"});
  RunWriter("lightning_writer.py", Dir({"--steps", "100,200,300", "--improving", "100"}));
  auto cs = Look();
  ExpectChosen(cs, "last.ckpt", "last.ckpt", std::nullopt);
  EXPECT_EQ(Ids(cs), (std::vector<std::string>{"last.ckpt", "epoch=0-step=100.ckpt"}));
}

TEST_F(PresetWriterTest, LightningTopkFileBeingWrittenIsNotTaken) {
  Watch(Preset::kLightning, {"*.ckpt"});
  WriterProcess w("lightning_writer.py", Dir({"--steps", "100,200", "--top-k", "2"}),
                  {"mid-topk-200", "mid-last-200"});
  ASSERT_TRUE(w.WaitAt("mid-topk-200"));
  EXPECT_EQ(Ids(Look()), (std::vector<std::string>{"last.ckpt", "epoch=0-step=100.ckpt"}));
  w.Release("mid-topk-200");
  ASSERT_TRUE(w.WaitAt("mid-last-200"));
  // last.ckpt is being rewritten: the new top-k file is the newest complete state.
  ExpectChosen(Look(), "epoch=1-step=200.ckpt", "epoch=1-step=200.ckpt", 200);
  w.Release("mid-last-200");
  ASSERT_TRUE(w.WaitDone());
  ExpectChosen(Look(), "last.ckpt", "last.ckpt", std::nullopt);
}

TEST_F(PresetWriterTest, LightningLinkedLastResumesFromTheTopkFileItPointsTo) {
  Watch(Preset::kLightning, {"*.ckpt"});
  RunWriter("lightning_writer.py", Dir({"--steps", "100,200", "--save-last", "link"}));
  auto cs = Look();
  ExpectChosen(cs, "epoch=1-step=200.ckpt", "epoch=1-step=200.ckpt", 200);
  EXPECT_EQ(Ids(cs), (std::vector<std::string>{"epoch=1-step=200.ckpt"}));
}

TEST_F(PresetWriterTest, LightningLegacyPartFileIsNotACheckpoint) {
  Watch(Preset::kLightning, {"*.ckpt"});
  WriterProcess w("lightning_writer.py",
                  Dir({"--steps", "100", "--legacy-part", "--save-last", "false"}),
                  {"part-written-topk-100"});
  ASSERT_TRUE(w.WaitAt("part-written-topk-100"));
  EXPECT_TRUE(Look().empty());  // complete and settled, but under its temporary name
  w.Release("part-written-topk-100");
  ASSERT_TRUE(w.WaitDone());
  ExpectChosen(Look(), "epoch=0-step=100.ckpt", "epoch=0-step=100.ckpt", 100);
}

// --- huggingface -------------------------------------------------------------

TEST_F(PresetWriterTest, HuggingfaceCheckpointIsCompleteOnceTrainerStateIsWritten) {
  Watch(Preset::kHuggingface);
  WriterProcess w("hf_writer.py", Dir({"--steps", "10,20"}), {"mid-model-20", "before-state-20"});
  for (const char* hold : {"mid-model-20", "before-state-20"}) {
    ASSERT_TRUE(w.WaitAt(hold));
    ExpectChosen(Look(), "checkpoint-10", "checkpoint-10", 10);
    w.Release(hold);
  }
  ASSERT_TRUE(w.WaitDone());
  auto cs = Look();
  ExpectChosen(cs, "checkpoint-20", "checkpoint-20", 20);
  EXPECT_EQ(cs[0].relpaths, (std::vector<std::string>{
                                "checkpoint-20/config.json", "checkpoint-20/model.safetensors",
                                "checkpoint-20/optimizer.pt", "checkpoint-20/rng_state.pth",
                                "checkpoint-20/scheduler.pt", "checkpoint-20/trainer_state.json",
                                "checkpoint-20/training_args.bin"}));
}

TEST_F(PresetWriterTest, HuggingfaceStagingDirectoryCountsOnlyAfterItsRename) {
  Watch(Preset::kHuggingface);
  WriterProcess w("hf_writer.py", Dir({"--steps", "30", "--staging-rename"}), {"before-rename-30"});
  ASSERT_TRUE(w.WaitAt("before-rename-30"));
  EXPECT_TRUE(Look().empty());
  clock_.Pause();
  w.Release("before-rename-30");
  ASSERT_TRUE(w.WaitDone());
  EXPECT_TRUE(Now().empty());  // renamed in just now: settling
  clock_.Resume();
  ExpectChosen(Look(), "checkpoint-30", "checkpoint-30", 30);
}

TEST_F(PresetWriterTest, HuggingfaceLegacyOrderWaitsForTheRngStateAfterTrainerState) {
  Watch(Preset::kHuggingface);
  WriterProcess w("hf_writer.py", Dir({"--steps", "40", "--order", "legacy"}), {"mid-rng-40"});
  ASSERT_TRUE(w.WaitAt("mid-rng-40"));
  EXPECT_TRUE(Look().empty());
  w.Release("mid-rng-40");
  ASSERT_TRUE(w.WaitDone());
  auto cs = Look();
  ExpectChosen(cs, "checkpoint-40", "checkpoint-40", 40);
  EXPECT_NE(std::find(cs[0].relpaths.begin(), cs[0].relpaths.end(), "checkpoint-40/rng_state.pth"),
            cs[0].relpaths.end());
}

TEST_F(PresetWriterTest, HuggingfaceRotationKeepsTheNewest) {
  Watch(Preset::kHuggingface);
  RunWriter("hf_writer.py", Dir({"--steps", "10,20,30", "--save-total-limit", "2"}));
  EXPECT_EQ(Ids(Look()), (std::vector<std::string>{"checkpoint-30", "checkpoint-20"}));
}

// --- dcp ---------------------------------------------------------------------

TEST_F(PresetWriterTest, DcpDirectoryIsCompleteOnceMetadataIsRenamedIn) {
  Watch(Preset::kDcp);
  WriterProcess w("dcp_writer.py", Dir({"--dirs", "step_100,step_200"}),
                  {"mid-shard-step_200", "before-rename-step_200"});
  for (const char* hold : {"mid-shard-step_200", "before-rename-step_200"}) {
    ASSERT_TRUE(w.WaitAt(hold));
    ExpectChosen(Look(), "step_100", "step_100", 100);
    w.Release(hold);
  }
  ASSERT_TRUE(w.WaitDone());
  auto cs = Look();
  ExpectChosen(cs, "step_200", "step_200", 200);
  EXPECT_EQ(cs[0].relpaths, (std::vector<std::string>{"step_200/.metadata", "step_200/__0_0.distcp",
                                                      "step_200/__1_0.distcp"}));
}

TEST_F(PresetWriterTest, DcpSaveIntoTheSameDirectoryWaitsForItsNewMetadata) {
  Watch(Preset::kDcp);
  WriterProcess w("dcp_writer.py", Dir({"--dirs", "latest,latest", "--chunk-delay", "0.01"}),
                  {"after-latest", "after-shards-latest-1"});
  ASSERT_TRUE(w.WaitAt("after-latest"));
  auto first = Look();
  ExpectChosen(first, "latest", "latest", std::nullopt);
  w.Release("after-latest");
  ASSERT_TRUE(w.WaitAt("after-shards-latest-1"));
  // New shards beside the old .metadata: not a checkpoint.
  EXPECT_TRUE(Look().empty());
  w.Release("after-shards-latest-1");
  ASSERT_TRUE(w.WaitDone());
  auto second = Look();
  ExpectChosen(second, "latest", "latest", std::nullopt);
  EXPECT_GT(second[0].newest_mtime, first[0].newest_mtime);
}

TEST_F(PresetWriterTest, DcpMetadataWrittenInPlaceByOlderReleases) {
  Watch(Preset::kDcp);
  RunWriter("dcp_writer.py", Dir({"--dirs", "epoch_3_step_1200", "--legacy-metadata", "--ranks",
                                  "4", "--files-per-rank", "2"}));
  auto cs = Look();
  ExpectChosen(cs, "epoch_3_step_1200", "epoch_3_step_1200", 1200);
  EXPECT_EQ(cs[0].relpaths.size(), 9u);
}

// --- tensorflow ----------------------------------------------------------------

TEST_F(PresetWriterTest, TensorflowTakesThePrefixTheCheckpointIndexNames) {
  Watch(Preset::kTensorflow);
  WriterProcess w("tf_writer.py", Dir({"--saves", "1,2", "--shards", "2"}),
                  {"mid-data-2", "after-temp-2", "before-state-2"});
  for (const char* hold : {"mid-data-2", "after-temp-2", "before-state-2"}) {
    ASSERT_TRUE(w.WaitAt(hold));
    auto cs = Look();
    ExpectChosen(cs, "ckpt-1", "ckpt-1", 1);
    EXPECT_EQ(cs[0].relpaths,
              (std::vector<std::string>{"checkpoint", "ckpt-1.data-00000-of-00002",
                                        "ckpt-1.data-00001-of-00002", "ckpt-1.index"}));
    w.Release(hold);
  }
  ASSERT_TRUE(w.WaitDone());
  ExpectChosen(Look(), "ckpt-2", "ckpt-2", 2);
}

TEST_F(PresetWriterTest, TensorflowV1SaverAbsolutePathsAreMadeRelative) {
  Watch(Preset::kTensorflow);
  RunWriter("tf_writer.py", Dir({"--saves", "100,200", "--name", "model.ckpt", "--absolute-paths",
                                 "--max-to-keep", "1"}));
  auto cs = Look();
  ExpectChosen(cs, "model.ckpt-200", "model.ckpt-200", 200);
  EXPECT_EQ(cs[0].relpaths,
            (std::vector<std::string>{"checkpoint", "model.ckpt-200.data-00000-of-00001",
                                      "model.ckpt-200.index"}));
}

}  // namespace
}  // namespace sg::testing
