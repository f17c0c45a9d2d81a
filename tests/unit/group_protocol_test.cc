// The round protocol's records and decisions (agent/repo/group_protocol.h) and
// their keys in the store (agent/repo/group_store.h), on a file:// store:
// docs/multi-node.md.
#include "agent/repo/store_layout.h"
#include "agent/repo/group_protocol.h"
#include "agent/trainer/restart_backoff.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/repo/group_store.h"
#include "agent/trainer/supervisor.h"
#include "tests/support/file_store_fixture.h"

namespace sg::testing {
namespace {

using std::chrono::seconds;

MemberRecord Member(std::string instance, std::string agent, int nodes = 3,
                    std::vector<std::string> command = {"torchrun", "train.py"}) {
  MemberRecord m;
  m.instance = std::move(instance);
  m.agent = std::move(agent);
  m.address = "10.0.0." + std::to_string(m.agent.size());
  m.job = "job";
  m.nodes = nodes;
  m.command_digest = CommandDigest(m.job, command);
  m.command = RedactArgs(command);
  return m;
}

PartRecord Part(int rank, int64_t step, uint64_t seq) {
  return PartRecord{rank, step, seq, "i-" + std::to_string(rank), 100, 40};
}

TEST(GroupProtocolTest, RecordsRoundTripThroughTheirJson) {
  const MemberRecord m = Member("i-1", "a-1");
  auto m2 = ParseMember(MemberToJson(m), "m");
  ASSERT_TRUE(m2.ok()) << m2.status().ToString();
  EXPECT_EQ(m2->command, m.command);
  EXPECT_EQ(m2->nodes, 3);

  RoundPlan p;
  p.round = 4;
  p.nodes = 2;
  p.generation = 9;
  p.port = 29500;
  p.members = {{"i-1", "a-1", "10.0.0.1"}, {"i-2", "a-2", "10.0.0.2"}};
  p.resume_seq = 7;
  p.resume_step = 1200;
  auto p2 = ParsePlan(PlanToJson(p), "plan");
  ASSERT_TRUE(p2.ok()) << p2.status().ToString();
  EXPECT_EQ(p2->RankOf("a-2"), 1);
  EXPECT_EQ(p2->RankOf("a-3"), std::nullopt);
  EXPECT_EQ(p2->resume_seq, 7u);
  EXPECT_EQ(p2->resume_step, 1200);

  GroupCommit g;
  g.seq = 3;
  g.round = 4;
  g.nodes = 2;
  g.step = 1200;
  g.created = "2026-11-25T12:00:00Z";
  g.parts = {Part(0, 1200, 5), Part(1, 1200, 6)};
  auto g2 = ParseGroupCommit(GroupCommitToJson(g), "group");
  ASSERT_TRUE(g2.ok()) << g2.status().ToString();
  EXPECT_EQ(g2->parts.at(1).seq, 6u);
  EXPECT_EQ(g2->Bytes(), 200u);
}

TEST(GroupProtocolTest, MalformedRecordsAreRefusedWithTheReason) {
  auto plan = ParsePlan(
      R"({"round":1,"nodes":3,"generation":1,"port":29500,"members":[{"instance":"i","agent":"a","address":"x"}],"resume_seq":null,"resume_step":null})",
      "plan.json");
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("lists 1 members for 3 nodes"), std::string::npos)
      << plan.status().message();
  auto twice = ParsePlan(
      R"({"round":1,"nodes":2,"generation":1,"port":29500,"members":[{"instance":"i","agent":"a","address":"x"},{"instance":"j","agent":"a","address":"y"}],"resume_seq":null,"resume_step":null})",
      "plan.json");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("listed twice"), std::string::npos);
  // A group snapshot with a part missing, or of another step, is no commit.
  GroupCommit g;
  g.seq = 1;
  g.nodes = 2;
  g.step = 10;
  g.created = "t";
  g.parts = {Part(0, 10, 1), Part(1, 9, 2)};
  auto mixed = ParseGroupCommit(GroupCommitToJson(g), "groups/0000000001.json");
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("groups/0000000001.json"), std::string::npos);
  g.parts.pop_back();
  EXPECT_FALSE(ParseGroupCommit(GroupCommitToJson(g), "g").ok());
  EXPECT_FALSE(ParseMember("[]", "m").ok());
  EXPECT_FALSE(ParseMember(R"({"instance":"i"})", "m").ok());
}

TEST(GroupProtocolTest, AConfigDifferenceNamesTheKey) {
  const MemberRecord coordinator = Member("i-c", "a-c");
  EXPECT_EQ(ConfigDifference(Member("i-1", "a-1"), coordinator), std::nullopt);
  auto nodes = ConfigDifference(Member("i-1", "a-1", 2), coordinator);
  ASSERT_TRUE(nodes);
  EXPECT_EQ(*nodes, "nodes: 2 here, 3 on the coordinator i-c");
  auto command = ConfigDifference(Member("i-1", "a-1", 3, {"torchrun", "other.py"}), coordinator);
  ASSERT_TRUE(command);
  EXPECT_TRUE(command->starts_with("command: [torchrun other.py] here, [torchrun train.py]"))
      << *command;
  MemberRecord job = Member("i-1", "a-1");
  job.job = "other";
  EXPECT_TRUE(ConfigDifference(job, coordinator)->starts_with("job: \"other\" here"));
}

TEST(GroupProtocolTest, AMemberIsStaleWhenItsRecordStopsChangingForTheTimeout) {
  FakeClock clock;
  MemberFreshness fresh(seconds(60));
  const MemberRecord a = Member("i-1", "a-1"), b = Member("i-2", "a-2");
  fresh.Observe(clock.Monotonic(), {{"a-1", {"e1", a}}, {"a-2", {"f1", b}}});
  clock.Advance(seconds(59));
  fresh.Observe(clock.Monotonic(), {{"a-1", {"e2", a}}, {"a-2", {"f1", b}}});  // a beat
  EXPECT_TRUE(fresh.Fresh("a-2", clock.Monotonic()));
  clock.Advance(seconds(1));
  EXPECT_FALSE(fresh.Fresh("a-2", clock.Monotonic())) << "unchanged for 60 s";
  EXPECT_TRUE(fresh.Fresh("a-1", clock.Monotonic()));
  ASSERT_EQ(fresh.FreshMembers(clock.Monotonic()).size(), 1u);
  EXPECT_DOUBLE_EQ(*fresh.Age("a-2", clock.Monotonic()), 60.0);
  // A record that is gone is gone at once.
  fresh.Observe(clock.Monotonic(), {{"a-2", {"f2", b}}});
  EXPECT_FALSE(fresh.Fresh("a-1", clock.Monotonic()));
  EXPECT_TRUE(fresh.Fresh("a-2", clock.Monotonic()));
}

TEST(GroupProtocolTest, TheCoordinatorIsRankZeroAndMembersKeepTheirOrder) {
  const MemberRecord c = Member("i-c", "a-c");
  const std::vector<MemberRecord> fresh = {Member("i-9", "a-9"), c, Member("i-1", "a-1")};
  EXPECT_EQ(PlanNextRound(c, {c, Member("i-1", "a-1")}, 3, std::nullopt, 1, 1, 29500, {}, {}),
            std::nullopt)
      << "two of three nodes: no plan";
  auto first = PlanNextRound(c, fresh, 3, std::nullopt, 1, 7, 29500, std::nullopt, std::nullopt);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->members.size(), 3u);
  EXPECT_EQ(first->members[0].agent, "a-c");
  EXPECT_EQ(first->members[1].agent, "a-1") << "newcomers by instance id";
  EXPECT_EQ(first->members[2].agent, "a-9");
  EXPECT_EQ(first->generation, 7u);

  // a-1 is replaced by a newcomer: a-9 keeps its rank (its own part, on its
  // disk already), the newcomer takes the free one.
  const std::vector<MemberRecord> next = {c, Member("i-9", "a-9"), Member("i-0", "a-0")};
  auto second = PlanNextRound(c, next, 3, first, 2, 7, 29500, 4, 1200);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->members[1].agent, "a-0");
  EXPECT_EQ(second->members[2].agent, "a-9");
  EXPECT_EQ(second->resume_seq, 4u);
  // The coordinator is gone and a-9 coordinates: it is rank 0; a-0 keeps 1.
  const MemberRecord c9 = Member("i-9", "a-9");
  auto third = PlanNextRound(c9, {c9, Member("i-0", "a-0"), Member("i-5", "a-5")}, 3, second, 3,
                             8, 29500, 5, 1300);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->members[0].agent, "a-9");
  EXPECT_EQ(third->members[1].agent, "a-0");
  EXPECT_EQ(third->members[2].agent, "a-5");

  // A member whose settings differ takes no part.
  const std::vector<MemberRecord> odd = {c, Member("i-1", "a-1"), Member("i-2", "a-2", 2)};
  EXPECT_EQ(PlanNextRound(c, odd, 3, std::nullopt, 1, 1, 29500, {}, {}), std::nullopt);
  // More fresh members than nodes: the surplus waits.
  const std::vector<MemberRecord> many = {c, Member("i-1", "a-1"), Member("i-2", "a-2"),
                                          Member("i-3", "a-3")};
  auto full = PlanNextRound(c, many, 3, std::nullopt, 1, 1, 29500, {}, {});
  ASSERT_TRUE(full);
  EXPECT_EQ(full->RankOf("a-3"), std::nullopt);
}

TEST(GroupProtocolTest, ANewcomerLeavesCoordinatingToTheLastRoundsMembersWhileOneIsAlive) {
  const MemberRecord a = Member("i-a", "a-a"), b = Member("i-b", "a-b"), gone = Member("i-g", "a-g");
  const MemberRecord newcomer = Member("i-0", "a-0");
  auto last = PlanNextRound(gone, {gone, a, b}, 3, std::nullopt, 1, 1, 29500, {}, {});
  ASSERT_TRUE(last);
  // No round yet: anyone may coordinate.
  EXPECT_TRUE(MayCoordinate(newcomer, std::nullopt, {newcomer, a}));
  // The last round's coordinator left; a and b are alive: only they try.
  EXPECT_FALSE(MayCoordinate(newcomer, last, {newcomer, a, b}));
  EXPECT_FALSE(MayCoordinate(newcomer, last, {newcomer, b}));
  EXPECT_TRUE(MayCoordinate(a, last, {newcomer, a, b}));
  // None of them is alive any more (every agent restarted, say): the newcomer may.
  EXPECT_TRUE(MayCoordinate(newcomer, last, {newcomer}));
  EXPECT_TRUE(MayCoordinate(newcomer, last, {newcomer, Member("i-a", "a-a-restarted")}))
      << "a restarted agent is a new member";
}

TEST(GroupProtocolTest, AGroupIsCompleteOnlyWithEveryRanksPartOfOneStep) {
  EXPECT_EQ(CompleteGroup({Part(0, 100, 1), Part(1, 100, 1)}, 3, std::nullopt), std::nullopt);
  EXPECT_EQ(CompleteGroup({Part(0, 100, 1), Part(1, 200, 1), Part(2, 100, 1)}, 3, std::nullopt),
            std::nullopt)
      << "three ranks, but not of one step";
  // The newest complete step wins; a rank's newest upload of it too.
  auto g = CompleteGroup({Part(0, 100, 1), Part(1, 100, 1), Part(0, 200, 2), Part(1, 200, 2),
                          Part(1, 200, 3)},
                         2, std::nullopt);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->at(0).step, 200);
  EXPECT_EQ(g->at(1).seq, 3u);
  // Nothing newer than what is committed: no new group.
  EXPECT_EQ(CompleteGroup({Part(0, 200, 2), Part(1, 200, 2)}, 2, 200), std::nullopt);
  // A rank outside the group does not complete it.
  EXPECT_EQ(CompleteGroup({Part(0, 100, 1), Part(5, 100, 1)}, 2, std::nullopt), std::nullopt);
}

TEST(GroupProtocolTest, TheTrainerGetsItsRankTheMasterAndTfConfig) {
  Config config;
  config.job = "job";
  config.checkpoint_dir = "/ckpt";
  config.group.port = 29500;
  config.command = {"torchrun", "--nnodes", "{nnodes}", "--node_rank", "{node_rank}",
                    "--master_addr", "{master_addr}", "--master_port", "{master_port}",
                    "--round={round}"};
  TrainerLaunch launch;
  launch.group = GroupPlacement{3, 2, {"10.0.0.1", "10.0.0.2", "10.0.0.3"}, 29400};
  EXPECT_EQ(TrainerArgv(config, launch),
            (std::vector<std::string>{"torchrun", "--nnodes", "3", "--node_rank", "2",
                                      "--master_addr", "10.0.0.1", "--master_port", "29400",
                                      "--round=3"}));
  auto env = TrainerEnvironment({}, config, launch, "/n");
  EXPECT_EQ(env["SPOTGUARD_NODE_RANK"], "2");
  EXPECT_EQ(env["SPOTGUARD_NNODES"], "3");
  EXPECT_EQ(env["SPOTGUARD_ROUND"], "3");
  EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(env["MASTER_PORT"], "29400");
  const auto tf = nlohmann::json::parse(env["TF_CONFIG"]);
  EXPECT_EQ(tf["cluster"]["chief"], nlohmann::json::array({"10.0.0.1:29400"}));
  EXPECT_EQ(tf["cluster"]["worker"], nlohmann::json::array({"10.0.0.2:29400", "10.0.0.3:29400"}));
  EXPECT_EQ(tf["task"]["type"], "worker");
  EXPECT_EQ(tf["task"]["index"], 1);

  // One node: a group of one in the placeholders, none of the environment.
  TrainerLaunch single;
  EXPECT_EQ(TrainerArgv(config, single),
            (std::vector<std::string>{"torchrun", "--nnodes", "1", "--node_rank", "0",
                                      "--master_addr", "127.0.0.1", "--master_port", "29500",
                                      "--round=0"}));
  auto single_env = TrainerEnvironment({}, config, single, "/n");
  EXPECT_EQ(single_env.count("MASTER_ADDR"), 0u);
  EXPECT_EQ(single_env.count("TF_CONFIG"), 0u);
}

class GroupStoreTest : public FileStoreTest {
 protected:
  RoundPlan Plan(uint64_t round, const std::string& coordinator) {
    RoundPlan p;
    p.round = round;
    p.nodes = 1;
    p.generation = 1;
    p.port = 29500;
    p.members = {{"i-" + coordinator, coordinator, "10.0.0.1"}};
    return p;
  }
};

TEST_F(GroupStoreTest, OnlyOneCoordinatorWritesARoundsPlan) {
  GroupStore group(*store_, "job");
  ASSERT_TRUE(group.WritePlan(Plan(1, "a-1")).ok());
  Status second = group.WritePlan(Plan(1, "a-2"));
  EXPECT_TRUE(second.Is(StatusCode::kPreconditionFailed)) << second.ToString();
  auto newest = group.NewestPlan();
  ASSERT_TRUE(newest.ok() && *newest);
  EXPECT_EQ((*newest)->members[0].agent, "a-1") << "the first plan stands";
  ASSERT_TRUE(group.WritePlan(Plan(2, "a-2")).ok());
  EXPECT_EQ((*group.NewestPlan())->round, 2u);
}

TEST_F(GroupStoreTest, MembersEndsPartsAndGroupsAreReadBack) {
  GroupStore group(*store_, "job");
  MemberRecord m = Member("i-1", "a-1");
  ASSERT_TRUE(group.WriteMember(m).ok());
  auto first = group.Members();
  ASSERT_TRUE(first.ok());
  const std::string etag = first->at("a-1").first;
  ++m.beat;
  ASSERT_TRUE(group.WriteMember(m).ok());
  EXPECT_NE(group.Members()->at("a-1").first, etag) << "every beat changes the record";
  ASSERT_TRUE(group.RemoveMember("a-1").ok());
  EXPECT_TRUE(group.Members()->empty());

  EXPECT_TRUE(group.Ends(1)->empty());
  ASSERT_TRUE(group.EndRound(1, RoundEnd{"notice", "i-1", "spot notice"}).ok());
  ASSERT_TRUE(group.EndRound(1, RoundEnd{"notice", "i-1", "again"}).ok()) << "no error twice";
  ASSERT_TRUE(group.EndRound(1, RoundEnd{"stale", "i-2", ""}).ok());
  auto ends = group.Ends(1);
  ASSERT_EQ(ends->size(), 2u);
  EXPECT_EQ(ends->at(0).detail, "spot notice");

  ASSERT_TRUE(group.AnnouncePart(1, Part(0, -5, 1)).ok());
  ASSERT_TRUE(group.AnnouncePart(1, Part(1, 10, 2)).ok());
  auto parts = group.Parts(1);
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ(parts->at(0).step, -5) << "name order is step order";

  GroupCommit g;
  g.seq = 1;
  g.nodes = 1;
  g.step = 10;
  g.created = "t";
  g.parts = {Part(0, 10, 2)};
  ASSERT_TRUE(group.CommitGroup(g).ok());
  EXPECT_TRUE(group.CommitGroup(g).Is(StatusCode::kPreconditionFailed));
  ASSERT_TRUE(store_->Put(group.GroupKey(2), "{not json", PutCondition::None()).ok());
  auto groups = group.Groups();
  ASSERT_TRUE(groups.ok());
  ASSERT_EQ(groups->size(), 1u) << "a damaged group snapshot is passed over";
  EXPECT_EQ(groups->at(0).step, 10);
}

TEST(GroupProtocolTest, WhatARoundsEndsAskOfItsMembers) {
  EXPECT_EQ(OutcomeOfEnds({}), RoundOutcome::kRunning);
  EXPECT_EQ(OutcomeOfEnds({RoundEnd{"stale", "i-1", ""}}), RoundOutcome::kStopNow);
  EXPECT_EQ(OutcomeOfEnds({RoundEnd{"crash", "i-1", ""}}), RoundOutcome::kStopNow);
  EXPECT_EQ(OutcomeOfEnds({RoundEnd{"restore", "i-1", ""}}), RoundOutcome::kStopNow);
  EXPECT_EQ(OutcomeOfEnds({RoundEnd{"notice", "i-1", ""}}), RoundOutcome::kCheckpointFirst);
  EXPECT_EQ(OutcomeOfEnds({RoundEnd{"stop", "i-1", ""}}), RoundOutcome::kCheckpointFirst);
  EXPECT_EQ(OutcomeOfEnds({RoundEnd{"crash", "i-1", ""}, RoundEnd{"notice", "i-2", ""}}),
            RoundOutcome::kCheckpointFirst)
      << "a notice is answered even when another node crashed";
  EXPECT_EQ(OutcomeOfEnds({RoundEnd{"notice", "i-1", ""}, RoundEnd{"complete", "i-2", ""}}),
            RoundOutcome::kComplete);
  // A member that left before its trainer started (a notice while it
  // restored): no group snapshot of the round can be made, notice or not.
  EXPECT_EQ(OutcomeOfEnds({RoundEnd{"left", "i-1", "notice"}}), RoundOutcome::kStopNow);
  EXPECT_EQ(OutcomeOfEnds({RoundEnd{"notice", "i-2", ""}, RoundEnd{"left", "i-1", "notice"}}),
            RoundOutcome::kStopNow);
}

TEST(GroupProtocolTest, TheNextRoundResumesTheNewestGroupSnapshotEveryoneCanRestore) {
  GroupCommit a, b, c;
  a.seq = 1;
  b.seq = 2;
  c.seq = 3;
  EXPECT_EQ(ResumePoint({}, std::nullopt), std::nullopt);
  EXPECT_EQ(ResumePoint({a, b, c}, std::nullopt)->seq, 3u);
  EXPECT_EQ(ResumePoint({a, b, c}, 3)->seq, 2u) << "3 failed a member's restore";
  EXPECT_EQ(ResumePoint({a, b, c}, 1), std::nullopt);
}

TEST(GroupProtocolTest, CrashRestartsBackOffLikeASingleNodes) {
  using std::chrono::milliseconds;
  EXPECT_EQ(RestartBackoff(0, milliseconds(10'000), milliseconds(300'000)).count(), 0);
  EXPECT_EQ(RestartBackoff(1, milliseconds(10'000), milliseconds(300'000)).count(), 10'000);
  EXPECT_EQ(RestartBackoff(3, milliseconds(10'000), milliseconds(300'000)).count(), 40'000);
  EXPECT_EQ(RestartBackoff(60, milliseconds(10'000), milliseconds(300'000)).count(), 300'000);
}

TEST(GroupProtocolTest, ARequestIsAnsweredByAGroupSnapshotSavedAfterItAndNotOlderThanAnyAsk) {
  const std::map<int, std::optional<int64_t>> asked = {{0, 20}, {1, 10}, {2, std::nullopt}};
  EXPECT_FALSE(AnswersRequest(asked, 3, std::nullopt)) << "no group snapshot";
  EXPECT_FALSE(AnswersRequest(asked, 3, 15)) << "rank 0 had step 20 when asked";
  EXPECT_TRUE(AnswersRequest(asked, 3, 20)) << "rank 1 had step 10: 20 was saved after its ask";
  EXPECT_TRUE(AnswersRequest(asked, 3, 25));
  EXPECT_FALSE(AnswersRequest({{0, 20}, {1, 10}}, 3, 25)) << "rank 2 was not asked yet";
  // The trainers saved step 30 on node 1's request before nodes 0 and 2
  // were asked: 30 is the answer, though they held it when asked.
  EXPECT_TRUE(AnswersRequest({{0, 30}, {1, 20}, {2, 30}}, 3, 30));
  // Every rank held step 30 when asked: nothing was saved after the request.
  EXPECT_FALSE(AnswersRequest({{0, 30}, {1, 30}, {2, 30}}, 3, 30));
  EXPECT_TRUE(AnswersRequest({{0, 30}, {1, 30}, {2, 30}}, 3, 31));
}

TEST(GroupProtocolTest, ANodeUploadsTheStepOthersAnnouncedBeforeItsOwn) {
  UploadInput in;
  in.rank = 1;
  in.local_steps = {100, 120, 140};
  in.parts = {Part(0, 120, 1), Part(2, 120, 1), Part(0, 160, 2)};
  in.periodic_due = true;
  auto c = ChooseUpload(in);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step, 120) << "160 is not on this node's disk (yet)";
  EXPECT_EQ(c->reason, UploadReason::kFollow);
  in.uploaded = {120};
  c = ChooseUpload(in);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step, 140);
  EXPECT_EQ(c->reason, UploadReason::kPeriodic);
  // What a group snapshot already holds is not uploaded again.
  in.committed_step = 140;
  EXPECT_EQ(ChooseUpload(in), std::nullopt);
}

TEST(GroupProtocolTest, AnAnswerToARequestIsUploadedOnceAndOnlyWhenNewer) {
  UploadInput in;
  in.local_steps = {100};
  in.asked = true;
  in.asked_after = 100;
  EXPECT_EQ(ChooseUpload(in), std::nullopt) << "the trainer has not answered yet";
  in.periodic_due = true;
  EXPECT_EQ(ChooseUpload(in), std::nullopt) << "no periodic upload while an answer is awaited";
  in.local_steps = {100, 105};
  auto c = ChooseUpload(in);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->step, 105);
  EXPECT_EQ(c->reason, UploadReason::kAnswer);
  in.uploaded = {105};
  EXPECT_EQ(ChooseUpload(in), std::nullopt);
  // A finished trainer's last checkpoint goes up without a timer.
  UploadInput last;
  last.local_steps = {200};
  last.trainer_done = true;
  ASSERT_TRUE(ChooseUpload(last));
  EXPECT_EQ(ChooseUpload(last)->reason, UploadReason::kLast);
  last.trainer_done = false;
  EXPECT_EQ(ChooseUpload(last), std::nullopt) << "not due";
}

TEST(GroupConfigTest, PartsOfEachRankAreAJobOfTheirOwn) {
  EXPECT_EQ(PartJob("train", 2), "train/nodes/2");
}

TEST(GroupProtocolTest, CheckpointsLeftFromBeforeTheRoundAreNotItsPartsUntilRewritten) {
  const auto t0 = std::chrono::system_clock::time_point(seconds(1'800'000'000));
  Checkpoint restored{"step_30", 30, {"step_30/a.pt"}, "step_30", t0};
  Checkpoint uncommitted{"step_40", 40, {"step_40/a.pt"}, "step_40", t0 + seconds(5)};
  const std::vector<CheckpointMark> before = {CheckpointMark::Of(restored),
                                              CheckpointMark::Of(uncommitted)};
  EXPECT_TRUE(FromBeforeTheRound(restored, before));
  EXPECT_TRUE(FromBeforeTheRound(uncommitted, before));
  Checkpoint rewritten = uncommitted;
  rewritten.newest_mtime += seconds(60);
  EXPECT_FALSE(FromBeforeTheRound(rewritten, before)) << "the trainer saved step 40 again";
  Checkpoint fresh{"step_50", 50, {"step_50/a.pt"}, "step_50", t0 + seconds(1)};
  EXPECT_FALSE(FromBeforeTheRound(fresh, before));
  EXPECT_FALSE(FromBeforeTheRound(fresh, {}));
}

}  // namespace
}  // namespace sg::testing
