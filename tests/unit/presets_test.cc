#include "agent/detect/presets.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/temp_dir.h"

namespace sg {
namespace {

using std::chrono::seconds;
using Time = std::chrono::system_clock::time_point;

const Time kT0 = Time(seconds(1'800'000'000));

ListedFile F(std::string relpath, int at_second = 0, uint64_t size = 100) {
  ListedFile f;
  f.relpath = std::move(relpath);
  f.size = size;
  f.mode = 0644;
  f.mtime = kT0 + seconds(at_second);
  return f;
}

ListedFile Link(std::string relpath, std::string target, int at_second = 0) {
  ListedFile f = F(std::move(relpath), at_second);
  f.is_symlink = true;
  f.symlink_target = std::move(target);
  return f;
}

std::vector<std::string> Ids(const std::vector<Checkpoint>& cs) {
  std::vector<std::string> ids;
  for (const Checkpoint& c : cs) ids.push_back(c.id);
  return ids;
}

using Strings = std::vector<std::string>;

std::vector<Checkpoint> Detect(Preset preset, const std::vector<ListedFile>& files,
                               const std::set<std::string>& unsettled = {},
                               std::vector<std::string> patterns = {"*"}) {
  return CheckpointDetector("/data/ckpt", preset, std::move(patterns)).Detect(files, unsettled);
}

// --- names -------------------------------------------------------------------

TEST(ParseStep, ReadsTheStepFromTheNamesTrainersUse) {
  EXPECT_EQ(ParseStep("step_300.pt"), 300);
  EXPECT_EQ(ParseStep("step=42.ckpt"), 42);
  EXPECT_EQ(ParseStep("epoch=3-step=400.ckpt"), 400);
  EXPECT_EQ(ParseStep("iter_5000.pth"), 5000);
  EXPECT_EQ(ParseStep("model_iter-7.bin"), 7);
  EXPECT_EQ(ParseStep("global_step1200"), 1200);
  EXPECT_EQ(ParseStep("step-8"), 8);
  EXPECT_EQ(ParseStep("iteration_0009"), 9);
  EXPECT_EQ(ParseStep("epoch_1_step_20_iter_30.pt"), 30);  // the last one wins
}

TEST(ParseStep, FindsNothingInNamesWithoutAStep) {
  for (const char* name : {"model.pt", "last.ckpt", "resnet50.pth", "steps.txt", "stepwise_3",
                           "mystep_4", "epoch=3.ckpt", "iter_.pt", ""}) {
    EXPECT_EQ(ParseStep(name), std::nullopt) << name;
  }
}

TEST(IsTempName, RecognizesUnfinishedFileNames) {
  for (const char* name : {".metadata.tmp", "model.pt.tmp", "checkpoint.tmp3f2a9c",
                           "ckpt-2.index.tempstate81723", "last.ckpt.part", "a.partial",
                           "x.tmp-ab12", "notes~", ".hidden", "tmpa1b2c3d_", "tmpk9x_2abz.pt"}) {
    EXPECT_TRUE(IsTempName(name)) << name;
  }
  for (const char* name : {".metadata", "model.pt", "tmp_model.pt", "template.json",
                           "model.part1.bin", "checkpoint", "trainer_state.json"}) {
    EXPECT_FALSE(IsTempName(name)) << name;
  }
}

TEST(Presets, SettleTimeIsShortForPresetsWithACompletionMarker) {
  EXPECT_EQ(DefaultSettleTime(Preset::kPytorch), seconds(10));
  EXPECT_EQ(DefaultSettleTime(Preset::kGeneric), seconds(10));
  EXPECT_EQ(DefaultSettleTime(Preset::kLightning), seconds(10));
  EXPECT_EQ(DefaultSettleTime(Preset::kCaffe), seconds(2));
  EXPECT_EQ(DefaultSettleTime(Preset::kHuggingface), seconds(2));
  EXPECT_EQ(DefaultSettleTime(Preset::kDcp), seconds(2));
  EXPECT_EQ(DefaultSettleTime(Preset::kTensorflow), seconds(2));
}

// --- caffe -------------------------------------------------------------------

TEST(CaffePreset, PairsModelAndSolverstateOfTheSameIteration) {
  auto cs =
      Detect(Preset::kCaffe, {F("snap_iter_100.caffemodel", 1), F("snap_iter_100.solverstate", 2),
                              F("snap_iter_200.caffemodel", 3), F("snap_iter_200.solverstate", 4),
                              F("snap_iter_300.caffemodel", 5)});
  ASSERT_EQ(Ids(cs), (Strings{"snap_iter_200", "snap_iter_100"}));
  EXPECT_EQ(cs[0].step, 200);
  EXPECT_EQ(cs[0].resume, "snap_iter_200.solverstate");
  EXPECT_EQ(cs[0].relpaths, (Strings{"snap_iter_200.caffemodel", "snap_iter_200.solverstate"}));
  EXPECT_EQ(cs[0].newest_mtime, kT0 + seconds(4));
}

TEST(CaffePreset, AFileStillSettlingHoldsItsIterationBack) {
  const std::vector<ListedFile> files = {F("snap_iter_1.caffemodel"), F("snap_iter_1.solverstate")};
  EXPECT_TRUE(Detect(Preset::kCaffe, files, {"snap_iter_1.solverstate"}).empty());
  EXPECT_TRUE(Detect(Preset::kCaffe, files, {"snap_iter_1.caffemodel"}).empty());
}

TEST(CaffePreset, ModelRewrittenAfterItsSolverstateIsNotAPair) {
  EXPECT_TRUE(
      Detect(Preset::kCaffe, {F("snap_iter_9.caffemodel", 10), F("snap_iter_9.solverstate", 5)})
          .empty());
}

TEST(CaffePreset, Hdf5AndSubdirectoryPrefixes) {
  auto cs =
      Detect(Preset::kCaffe,
             {F("out/lenet_iter_10000.caffemodel.h5"), F("out/lenet_iter_10000.solverstate.h5"),
              F("out/lenet_iter_20000.caffemodel.h5"), F("out/lenet_iter_20000.solverstate")});
  ASSERT_EQ(Ids(cs), (Strings{"out/lenet_iter_10000"}));
  EXPECT_EQ(cs[0].resume, "out/lenet_iter_10000.solverstate.h5");
}

// --- pytorch / generic / lightning ---------------------------------------------

TEST(FilePresets, EachMatchingFileIsACheckpointOrderedByStep) {
  auto cs = Detect(Preset::kPytorch, {F("step_100.pt", 9), F("step_200.pt", 1), F("notes.txt", 20)},
                   {}, {"*.pt"});
  ASSERT_EQ(Ids(cs), (Strings{"step_200.pt", "step_100.pt"}));
  EXPECT_EQ(cs[0].resume, "step_200.pt");
  EXPECT_EQ(cs[0].relpaths, (Strings{"step_200.pt"}));
}

TEST(FilePresets, UnsettledAndTemporaryFilesAreLeftOut) {
  auto cs = Detect(Preset::kGeneric,
                   {F("a.pt"), F("b.pt"), F("c.pt.tmp"), F(".d.pt"), F("tmpab12cd34.pt")}, {"b.pt"},
                   {"*"});
  EXPECT_EQ(Ids(cs), (Strings{"a.pt"}));
}

TEST(FilePresets, StepLessFilesAreOrderedByTime) {
  auto cs = Detect(Preset::kPytorch, {F("model.pt", 5), F("best.pt", 9)}, {}, {"*.pt"});
  EXPECT_EQ(Ids(cs), (Strings{"best.pt", "model.pt"}));
  EXPECT_EQ(cs[0].step, std::nullopt);
}

TEST(FilePresets, PatternsWithASlashMatchTheRelativePath) {
  auto cs = Detect(Preset::kGeneric, {F("keep/a.bin"), F("skip/b.bin")}, {}, {"keep/*.bin"});
  EXPECT_EQ(Ids(cs), (Strings{"keep/a.bin"}));
}

TEST(FilePresets, FilesInAStepDirectoryFormOneCheckpoint) {
  auto cs = Detect(Preset::kPytorch,
                   {F("run/step_100/model.pt", 1), F("run/step_100/optim.pt", 2),
                    F("run/step_200/model.pt", 3), F("run/step_200/optim.pt", 4)},
                   {"run/step_200/optim.pt"}, {"*.pt"});
  ASSERT_EQ(Ids(cs), (Strings{"run/step_100"}));
  EXPECT_EQ(cs[0].resume, "run/step_100");
  EXPECT_EQ(cs[0].step, 100);
  EXPECT_EQ(cs[0].relpaths, (Strings{"run/step_100/model.pt", "run/step_100/optim.pt"}));
}

TEST(LightningPreset, LastCkptRanksAboveTheStepsWrittenBeforeIt) {
  auto cs = Detect(Preset::kLightning,
                   {F("epoch=0-step=100.ckpt", 1), F("epoch=1-step=200.ckpt", 2), F("last.ckpt", 3),
                    F("epoch=2-step=300.ckpt", 4)},
                   {}, {"*.ckpt"});
  EXPECT_EQ(Ids(cs), (Strings{"epoch=2-step=300.ckpt", "last.ckpt", "epoch=1-step=200.ckpt",
                              "epoch=0-step=100.ckpt"}));
}

TEST(LightningPreset, SymlinkedLastIsNotACheckpointOfItsOwn) {
  auto cs = Detect(Preset::kLightning,
                   {F("epoch=1-step=200.ckpt", 2), Link("last.ckpt", "epoch=1-step=200.ckpt", 3)},
                   {}, {"*.ckpt"});
  EXPECT_EQ(Ids(cs), (Strings{"epoch=1-step=200.ckpt"}));
}

// Symlinks are never followed: a symlinked checkpoint file is never uploaded,
// and the agent says so once per path (docs/checkpoints.md, "Symlinks").
TEST(Symlinks, ASymlinkedCheckpointFileIsReportedOncePerPath) {
  CheckpointDetector detector("/data/ckpt", Preset::kPytorch, {"*.pt"});
  const std::vector<ListedFile> files = {F("step_100.pt", 1), Link("step_200.pt", "", 2),
                                         Link("last.pt", "step_100.pt", 3),
                                         Link(".hidden.pt", "", 3)};
  auto cs = detector.Detect(files, {});
  EXPECT_EQ(Ids(cs), (Strings{"step_100.pt"})) << "the symlinked step_200.pt is no checkpoint";
  EXPECT_EQ(CheckpointDetector::SymlinksLeftOut(files, cs), (Strings{"step_200.pt"}))
      << "a link to a listed regular file (last.pt) is not left out; hidden paths are ignored";
  EXPECT_EQ(detector.symlink_warnings(), 1u);
  detector.Detect(files, {});
  CheckpointDetector copy = detector;
  copy.Detect(files, {});
  EXPECT_EQ(detector.symlink_warnings(), 1u) << "once per path, also for copies";
  detector.Detect({F("step_100.pt", 1), Link("step_300.pt", "", 4)}, {});
  EXPECT_EQ(detector.symlink_warnings(), 2u) << "a new path is reported";
}

TEST(Symlinks, ALinkInsideADirectoryCheckpointIsReportedEvenToAListedFile) {
  const std::vector<ListedFile> files = {
      F("checkpoint-5/trainer_state.json", 1), F("checkpoint-5/optimizer.pt", 1),
      F("shared/model.safetensors", 1),
      Link("checkpoint-5/model.safetensors", "shared/model.safetensors", 1)};
  CheckpointDetector detector("/data/ckpt", Preset::kHuggingface, {});
  auto cs = detector.Detect(files, {});
  ASSERT_EQ(Ids(cs), (Strings{"checkpoint-5"}));
  EXPECT_EQ(cs[0].relpaths.size(), 2u) << "the link is not part of the snapshot";
  EXPECT_EQ(CheckpointDetector::SymlinksLeftOut(files, cs),
            (Strings{"checkpoint-5/model.safetensors"}));
  EXPECT_EQ(detector.symlink_warnings(), 1u);
}

// --- huggingface ---------------------------------------------------------------

TEST(HuggingfacePreset, CheckpointDirectoryWithTrainerState) {
  auto cs =
      Detect(Preset::kHuggingface,
             {F("checkpoint-500/model.safetensors", 1), F("checkpoint-500/optimizer.pt", 2),
              F("checkpoint-500/global_step500/zero_pp_rank_0_mp_rank_00_model_states.pt", 2),
              F("checkpoint-500/trainer_state.json", 3), F("checkpoint-1000/model.safetensors", 9),
              F("tmp-checkpoint-1500/model.safetensors", 9),
              F("tmp-checkpoint-1500/trainer_state.json", 9), F("runs/events.out", 9)});
  ASSERT_EQ(Ids(cs), (Strings{"checkpoint-500"}));
  EXPECT_EQ(cs[0].step, 500);
  EXPECT_EQ(cs[0].resume, "checkpoint-500");
  EXPECT_EQ(cs[0].relpaths.size(), 4u);
}

TEST(HuggingfacePreset, AnythingStillSettlingInsideHoldsItBack) {
  const std::vector<ListedFile> files = {F("out/checkpoint-8/trainer_state.json"),
                                         F("out/checkpoint-8/rng_state.pth")};
  EXPECT_TRUE(Detect(Preset::kHuggingface, files, {"out/checkpoint-8/rng_state.pth"}).empty());
  EXPECT_TRUE(Detect(Preset::kHuggingface, files, {"out/checkpoint-8/trainer_state.json"}).empty());
  EXPECT_EQ(Ids(Detect(Preset::kHuggingface, files)), (Strings{"out/checkpoint-8"}));
}

// --- dcp -----------------------------------------------------------------------

TEST(DcpPreset, DirectoryWithMetadataNewerThanItsShards) {
  auto cs = Detect(Preset::kDcp, {F("step_100/__0_0.distcp", 1), F("step_100/__1_0.distcp", 2),
                                  F("step_100/.metadata", 3), F("step_200/__0_0.distcp", 5),
                                  F("step_200/.metadata.tmp", 6)});
  ASSERT_EQ(Ids(cs), (Strings{"step_100"}));
  EXPECT_EQ(cs[0].step, 100);
  EXPECT_EQ(cs[0].resume, "step_100");
  EXPECT_EQ(cs[0].relpaths,
            (Strings{"step_100/.metadata", "step_100/__0_0.distcp", "step_100/__1_0.distcp"}));
}

TEST(DcpPreset, ShardsNewerThanTheMetadataAreASaveInProgress) {
  EXPECT_TRUE(
      Detect(Preset::kDcp, {F("latest/__0_0.distcp", 7), F("latest/.metadata", 3)}).empty());
}

TEST(DcpPreset, CheckpointDirItselfAndNestedCheckpoints) {
  auto cs = Detect(Preset::kDcp, {F("__0_0.distcp", 1), F(".metadata", 2),
                                  F("old/step_5/__0_0.distcp", 0), F("old/step_5/.metadata", 0)});
  ASSERT_EQ(Ids(cs), (Strings{".", "old/step_5"}));
  EXPECT_EQ(cs[0].resume, ".");
  EXPECT_EQ(cs[0].relpaths, (Strings{".metadata", "__0_0.distcp"}));
}

// With a node rank other than 0 (a member of a multi-node group), a step
// directory is also complete by this node's marker: the other nodes' dirs
// never get `.metadata` when the nodes share no filesystem.
std::vector<Checkpoint> DetectOnNode(std::optional<int> rank, const std::vector<ListedFile>& files,
                                     const std::set<std::string>& unsettled = {}) {
  CheckpointDetector d("/data/ckpt", Preset::kDcp, {});
  d.SetNodeRank(rank);
  return d.Detect(files, unsettled);
}

TEST(DcpPreset, OnOtherNodesAStepDirIsCompleteByThisNodesMarker) {
  const std::vector<ListedFile> files = {
      F("step_10/shard_2.pt", 1), F("step_10/shard_3.pt", 1), F("step_10/node_1.json", 2),
      F("step_20/shard_2.pt", 3),                                  // no marker yet
      F("step_30/shard_2.pt", 9), F("step_30/node_1.json", 4),     // a save in progress
      F("step_40/shard_4.pt", 5), F("step_40/node_2.json", 6),     // another node's marker
      F("step_50/__1_0.distcp", 7), F("step_50/node_1.done", 8)};  // the `.done` form
  auto cs = DetectOnNode(1, files);
  ASSERT_EQ(Ids(cs), (Strings{"step_50", "step_10"}));
  EXPECT_EQ(cs[1].step, 10);
  EXPECT_EQ(cs[1].resume, "step_10");
  EXPECT_EQ(cs[1].relpaths,
            (Strings{"step_10/node_1.json", "step_10/shard_2.pt", "step_10/shard_3.pt"}));
  // An unsettled marker is not complete either.
  EXPECT_EQ(Ids(DetectOnNode(1, files, {"step_50/node_1.done"})), (Strings{"step_10"}));
}

TEST(DcpPreset, RankZeroAndSingleNodesStillNeedTheMetadata) {
  const std::vector<ListedFile> files = {F("step_10/shard_0.pt", 1), F("step_10/node_0.json", 2),
                                         F("step_20/shard_0.pt", 3), F("step_20/node_0.json", 4),
                                         F("step_20/.metadata", 5)};
  // node_0.json comes before .metadata: with it alone the part would lack
  // the file every node's reader needs.
  EXPECT_EQ(Ids(DetectOnNode(0, files)), (Strings{"step_20"}));
  EXPECT_EQ(Ids(DetectOnNode(std::nullopt, files)), (Strings{"step_20"}));
  // .metadata on another node too (a shared filesystem) is complete there.
  EXPECT_EQ(Ids(DetectOnNode(1, {F("step_5/shard_1.pt", 1), F("step_5/.metadata", 2)})),
            (Strings{"step_5"}));
}

TEST(DcpPreset, TheNewestMarkerOfADirectoryDescribesIt) {
  // Rank 0's .metadata came with a restore (at 5); the trainer saved the
  // step again and wrote its own marker last (at 9): complete.
  EXPECT_EQ(Ids(DetectOnNode(1, {F("step_5/.metadata", 5), F("step_5/__1_0.distcp", 8),
                                 F("step_5/node_1.done", 9)})),
            (Strings{"step_5"}));
  // The same save still under way (its shard newer than every marker).
  EXPECT_TRUE(DetectOnNode(1, {F("step_5/.metadata", 5), F("step_5/node_1.done", 3),
                               F("step_5/__1_0.distcp", 8)})
                  .empty());
}

// --- tensorflow ------------------------------------------------------------------

class TensorflowPresetTest : public ::testing::Test {
 protected:
  std::vector<Checkpoint> Detect(const std::vector<ListedFile>& files,
                                 const std::set<std::string>& unsettled = {}) {
    return CheckpointDetector(dir_.path(), Preset::kTensorflow, {}).Detect(files, unsettled);
  }
  testing::TempDir dir_;
};

TEST_F(TensorflowPresetTest, TakesThePrefixTheIndexNames) {
  dir_.WriteFile("checkpoint",
                 "model_checkpoint_path: \"ckpt-2\"\nall_model_checkpoint_paths: \"ckpt-1\"\n"
                 "all_model_checkpoint_paths: \"ckpt-2\"\n");
  const std::vector<ListedFile> files = {F("checkpoint", 9),
                                         F("ckpt-1.index", 1),
                                         F("ckpt-1.data-00000-of-00001", 1),
                                         F("ckpt-2.index", 5),
                                         F("ckpt-2.data-00000-of-00002", 4),
                                         F("ckpt-2.data-00001-of-00002", 4),
                                         F("ckpt-3.index", 8),
                                         F("ckpt-3.data-00000-of-00001", 8)};
  auto cs = Detect(files);
  ASSERT_EQ(Ids(cs), (Strings{"ckpt-2"}));
  EXPECT_EQ(cs[0].step, 2);
  EXPECT_EQ(cs[0].resume, "ckpt-2");
  EXPECT_EQ(cs[0].relpaths, (Strings{"checkpoint", "ckpt-2.data-00000-of-00002",
                                     "ckpt-2.data-00001-of-00002", "ckpt-2.index"}));
  EXPECT_TRUE(Detect(files, {"ckpt-2.data-00001-of-00002"}).empty());
  EXPECT_TRUE(Detect(files, {"checkpoint"}).empty());
}

TEST_F(TensorflowPresetTest, AMissingShardMakesItIncomplete) {
  dir_.WriteFile("checkpoint", "model_checkpoint_path: \"ckpt-2\"\n");
  EXPECT_TRUE(
      Detect({F("checkpoint"), F("ckpt-2.index"), F("ckpt-2.data-00001-of-00002")}).empty());
  EXPECT_TRUE(Detect({F("checkpoint"), F("ckpt-2.data-00000-of-00001")}).empty());
}

TEST_F(TensorflowPresetTest, AbsolutePathsAndSubdirectoriesAndV1MetaGraphs) {
  dir_.WriteFile("train/checkpoint",
                 "model_checkpoint_path: \"" + dir_.path() + "/train/model.ckpt-300\"\n");
  auto cs = Detect({F("train/checkpoint"), F("train/model.ckpt-300.index"),
                    F("train/model.ckpt-300.data-00000-of-00001"), F("train/model.ckpt-300.meta")});
  ASSERT_EQ(Ids(cs), (Strings{"train/model.ckpt-300"}));
  EXPECT_EQ(cs[0].step, 300);
  EXPECT_EQ(cs[0].relpaths.size(), 4u);
  // Moved from elsewhere: the name beside the index is used.
  dir_.WriteFile("train/checkpoint", "model_checkpoint_path: \"/old/place/model.ckpt-300\"\n");
  EXPECT_EQ(Ids(Detect({F("train/checkpoint"), F("train/model.ckpt-300.index"),
                        F("train/model.ckpt-300.data-00000-of-00001")})),
            (Strings{"train/model.ckpt-300"}));
  dir_.WriteFile("train/checkpoint", "model_checkpoint_path: \"../../etc/passwd\"\n");
  EXPECT_TRUE(Detect({F("train/checkpoint")}).empty());
}

// --- ordering ------------------------------------------------------------------

Checkpoint C(std::string id, std::optional<int64_t> step, int at_second) {
  Checkpoint c;
  c.id = std::move(id);
  c.step = step;
  c.newest_mtime = kT0 + seconds(at_second);
  return c;
}

TEST(Ordering, ByStepThenTime) {
  std::vector<Checkpoint> cs = {C("a", 5, 9), C("b", 7, 1), C("c", 7, 2), C("d", std::nullopt, 3),
                                C("e", std::nullopt, 0)};
  SortNewestFirst(cs);
  EXPECT_EQ(Ids(cs), (Strings{"d", "c", "b", "a", "e"}));
}

TEST(Ordering, NewerThanTheLastCommitted) {
  const CheckpointMark mark = CheckpointMark::Of(C("step_200.pt", 200, 5));
  EXPECT_TRUE(IsNewerThan(C("step_300.pt", 300, 1), mark));
  EXPECT_FALSE(IsNewerThan(C("step_200.pt", 200, 9), mark));  // same step rewritten
  EXPECT_FALSE(IsNewerThan(C("step_100.pt", 100, 9), mark));
  EXPECT_TRUE(IsNewerThan(C("last.ckpt", std::nullopt, 6), mark));
  EXPECT_FALSE(IsNewerThan(C("last.ckpt", std::nullopt, 5), mark));

  std::vector<Checkpoint> cs = {C("x", 300, 1), C("y", 200, 1)};
  EXPECT_EQ(FirstNewerThan(cs, mark)->id, "x");
  EXPECT_EQ(FirstNewerThan(cs, std::nullopt)->id, "x");
  EXPECT_EQ(FirstNewerThan({C("y", 200, 1)}, mark), std::nullopt);
}

TEST(AgentPrivatePaths, AreThoseWithASpotguardComponent) {
  EXPECT_TRUE(IsAgentPrivatePath(".spotguard-staging"));
  EXPECT_TRUE(IsAgentPrivatePath(".spotguard-staging/capture-x/a.pt"));
  EXPECT_TRUE(IsAgentPrivatePath("sub/.spotguard-restore-1/a"));
  EXPECT_FALSE(IsAgentPrivatePath("spotguard/a.pt"));
  EXPECT_FALSE(IsAgentPrivatePath("a/.metadata"));
}

// --- listing ---------------------------------------------------------------------

TEST(ListCheckpointDir, ListsFilesAndSymlinksRecursivelyButNotAgentPrivatePaths) {
  testing::TempDir dir;
  dir.WriteFile("a.pt", "12345");
  dir.WriteFile("sub/deeper/b.pt", "x");
  dir.WriteFile(".spotguard-staging/capture-1/a.pt", "12345");
  ASSERT_EQ(::symlink("a.pt", dir.Join("last.pt").c_str()), 0);
  ASSERT_EQ(::symlink("/etc/hostname", dir.Join("outside").c_str()), 0);
  ASSERT_EQ(::symlink("sub", dir.Join("linkdir").c_str()), 0);
  ASSERT_EQ(::chmod(dir.Join("a.pt").c_str(), 0640), 0);

  auto files = ListCheckpointDir(dir.path() + "/");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  std::vector<std::string> paths;
  for (const ListedFile& f : *files) paths.push_back(f.relpath);
  EXPECT_EQ(paths, (Strings{"a.pt", "last.pt", "linkdir", "outside", "sub/deeper/b.pt"}));
  EXPECT_EQ((*files)[0].size, 5u);
  EXPECT_EQ((*files)[0].mode, 0640u);
  EXPECT_FALSE((*files)[0].is_symlink);
  EXPECT_TRUE((*files)[1].is_symlink);
  EXPECT_EQ((*files)[1].symlink_target, "a.pt");
  EXPECT_EQ((*files)[3].symlink_target, "");

  EXPECT_TRUE(ListCheckpointDir(dir.Join("missing")).status().Is(StatusCode::kNotFound));
}

}  // namespace
}  // namespace sg
