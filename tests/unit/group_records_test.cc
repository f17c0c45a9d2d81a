// The group's records as the agents and the commands read them, on a
// file:// store (agent/repo/group_store.h, docs/design.md §14): sequence numbers
// come from the keys listed, so a damaged record never blocks the next
// commit or round; the failure record and how it is cleared; secrets of the
// trainer's command never reach a record; a job that ran on one node is not
// started over by a group.
#include <gtest/gtest.h>

#include <mutex>

#include "agent/config/exit_codes.h"
#include "agent/cli/group_commands.h"
#include "agent/cli/group_status.h"
#include "agent/repo/group_protocol.h"
#include "agent/repo/group_store.h"
#include "agent/run/job_start.h"
#include "agent/repo/store_layout.h"
#include "common/crypto.h"
#include "common/log.h"
#include "tests/support/file_store_fixture.h"

namespace sg::testing {
namespace {

GroupCommit Group(uint64_t seq, int64_t step) {
  GroupCommit g;
  g.seq = seq;
  g.round = 1;
  g.nodes = 2;
  g.step = step;
  g.generation = 1;
  g.created = "2026-11-28T10:00:00Z";
  g.parts = {{0, step, seq, "i-0", 100, 40}, {1, step, seq, "i-1", 100, 40}};
  return g;
}

RoundPlan Plan(uint64_t round) {
  RoundPlan p;
  p.round = round;
  p.nodes = 2;
  p.generation = 1;
  p.port = 29500;
  p.members = {{"i-0", "a-0", "10.0.0.0"}, {"i-1", "a-1", "10.0.0.1"}};
  return p;
}

class GroupRecordsTest : public FileStoreTest {
 protected:
  GroupRecordsTest() {
    config_.job = "job";
    config_.nodes = 2;
    config_.group.timeout = std::chrono::seconds(30);
    config_.command = {"python3", "train.py", "--api-key=SG-SECRET-1", "--password", "hunter2"};
  }
  void SetUp() override {
    FileStoreTest::SetUp();
    group_.emplace(*store_, "job");
  }
  void Garbage(const std::string& key) {
    ASSERT_TRUE(store_->Put(key, "{not json", PutCondition::None()).ok());
  }

  Config config_;
  std::optional<GroupStore> group_;
};

TEST_F(GroupRecordsTest, AnUnreadableGroupSnapshotAtTheTopHoldsBackNoCommit) {
  ASSERT_TRUE(group_->CommitGroup(Group(1, 10)).ok());
  Garbage(group_->GroupKey(2));
  auto listing = group_->ListGroups();
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  ASSERT_EQ(listing->groups.size(), 1u);
  EXPECT_EQ(listing->groups.back().seq, 1u) << "the newest readable one";
  // The next seq comes from the keys: seq 2's key is taken whatever it holds.
  EXPECT_EQ(listing->NextSeq(), 3u);
  ASSERT_EQ(listing->unreadable.size(), 1u);
  EXPECT_EQ(listing->unreadable[0].key, group_->GroupKey(2));
  EXPECT_FALSE(group_->CommitGroup(Group(listing->groups.back().seq + 1, 20)).ok())
      << "the seq after the newest readable record is taken: a coordinator that used it "
         "would fail every commit";
  ASSERT_TRUE(group_->CommitGroup(Group(listing->NextSeq(), 20)).ok());
  auto after = group_->ListGroups();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->groups.back().seq, 3u);
  EXPECT_EQ(after->NextSeq(), 4u);
  // A record that names another seq than its key's is unreadable too.
  ASSERT_TRUE(store_->Put(group_->GroupKey(7), GroupCommitToJson(Group(5, 30)),
                          PutCondition::None()).ok());
  after = group_->ListGroups();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->NextSeq(), 8u);
  EXPECT_EQ(after->unreadable.size(), 2u);
}

// An unreadable record is warned about once per process, not at every
// commit (retention reads the records with a GroupStore of its own each
// time: 48 warnings in 40 s before).
TEST_F(GroupRecordsTest, AnUnreadableRecordIsWarnedAboutOnceHoweverManyReadersReadIt) {
  // Content of its own, so that no other test's record has its etag.
  ASSERT_TRUE(store_->Put(group_->GroupKey(4), "{not json " + dir_.path(), PutCondition::None())
                  .ok());
  std::mutex mu;
  std::vector<std::string> warnings;
  InitLogging(LogLevel::kInfo, LogFormat::kText);
  SetLogTap([&](std::string_view, std::string_view level, std::string_view message) {
    std::lock_guard<std::mutex> lock(mu);
    if (level == "warn" && message.find("groups/0000000004.json") != std::string_view::npos) {
      warnings.emplace_back(message);
    }
  });
  for (int i = 0; i < 3; ++i) {
    auto listing = GroupStore(*store_, "job").ListGroups();
    ASSERT_TRUE(listing.ok());
    EXPECT_EQ(listing->unreadable.size(), 1u) << "still named in every listing";
  }
  // A new version of the record (another etag) is news again.
  ASSERT_TRUE(store_->Put(group_->GroupKey(4), "[]", PutCondition::None()).ok());
  ASSERT_TRUE(GroupStore(*store_, "job").ListGroups().ok());
  SetLogTap({});
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(warnings.size(), 2u) << "once for each version of the record";
}

TEST_F(GroupRecordsTest, AnUnreadablePlanAtTheTopHoldsBackNoRound) {
  ASSERT_TRUE(group_->WritePlan(Plan(1)).ok());
  Garbage(group_->RoundPrefix(2) + "plan.json");
  auto plans = group_->Plans();
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_TRUE(plans->newest);
  EXPECT_EQ(plans->newest->round, 1u);
  EXPECT_EQ(plans->NextRound(), 3u) << "round 2's plan key is taken, whatever it holds";
  ASSERT_EQ(plans->unreadable.size(), 1u);
  EXPECT_EQ(plans->unreadable[0].key, group_->RoundPrefix(2) + "plan.json");
  EXPECT_FALSE(group_->WritePlan(Plan(plans->newest->round + 1)).ok());
  ASSERT_TRUE(group_->WritePlan(Plan(plans->NextRound())).ok());
  auto newest = group_->NewestPlan();
  ASSERT_TRUE(newest.ok() && *newest);
  EXPECT_EQ((*newest)->round, 3u);

  // Only an unreadable plan: no plan to go by, and still the round above it.
  GroupStore other(*store_, "other");
  Garbage(other.RoundPrefix(4) + "plan.json");
  auto only = other.Plans();
  ASSERT_TRUE(only.ok());
  EXPECT_FALSE(only->newest);
  EXPECT_EQ(only->NextRound(), 5u);
}

TEST_F(GroupRecordsTest, StatusAndVerifyNameTheUnreadableRecords) {
  Garbage(group_->GroupKey(1));
  Garbage(group_->RoundPrefix(1) + "plan.json");
  auto j = GroupStatusJson(config_, *store_);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  ASSERT_EQ((*j)["unreadable"].size(), 2u) << j->dump(2);
  const std::string text = GroupStatusText(*j);
  EXPECT_NE(text.find("problem: skipped unreadable record job/groups/0000000001.json"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("job/group/rounds/0000000001/plan.json"), std::string::npos) << text;
  ::testing::internal::CaptureStderr();
  const int code = RunGroupVerify(config_, *store_, std::nullopt);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, kExitFailure) << "damage, not an empty store (exit 3)\n" << err;
  EXPECT_NE(err.find("cannot read job/groups/0000000001.json"), std::string::npos) << err;
}

// verify names what is damaged: a whole newest snapshot is said to be whole,
// and an unreadable older record is named apart (it was "group snapshot 2 or
// its records are damaged", the damaged record being 1's).
TEST_F(GroupRecordsTest, VerifyNamesTheUnreadableRecordApartFromAWholeSnapshot) {
  SnapshotRequest part;
  part.job = PartJob("job", 0);
  auto stored = CommitTree({{"step_10.pt", {"weights", 0644}}}, part, 10);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  Garbage(group_->GroupKey(1));
  GroupCommit g;
  g.seq = 2;
  g.round = 1;
  g.nodes = 1;
  g.step = 10;
  g.created = "2026-11-28T10:00:00Z";
  g.parts = {PartRecord{.rank = 0, .step = 10, .seq = stored->seq, .instance = "i-test"}};
  ASSERT_TRUE(group_->CommitGroup(g).ok());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = RunGroupVerify(config_, *store_, std::nullopt);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, kExitFailure) << err;
  EXPECT_NE(out.find("group snapshot 0000000002: 1 nodes, 1 files"), std::string::npos) << out;
  EXPECT_NE(out.find("every checksum matches"), std::string::npos) << out;
  EXPECT_NE(err.find("other group records are damaged: cannot read job/groups/0000000001.json"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("group snapshot 0000000002"), std::string::npos) << err;
}

TEST_F(GroupRecordsTest, AFailureIsShownWithHowToGoOnAndCleared) {
  const std::string settings = SettingsDigest(config_);
  ASSERT_TRUE(group_->MarkFailed({"a trainer crashed in 3 rounds in a row (restart.max 2)",
                                 "2026-11-28T10:00:00Z", 3, settings})
                  .ok());
  auto failed = group_->Failed();
  ASSERT_TRUE(failed.ok() && *failed);
  EXPECT_EQ((*failed)->round, 3u);
  EXPECT_EQ((*failed)->settings, settings);
  auto j = GroupStatusJson(config_, *store_);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["failed"]["round"], 3);
  const std::string text = GroupStatusText(*j);
  EXPECT_NE(text.find("FAILED at 2026-11-28T10:00:00Z: a trainer crashed in 3 rounds"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("spotguard reset-failure"), std::string::npos) << text;
  ASSERT_TRUE(group_->ClearFailure().ok());
  failed = group_->Failed();
  ASSERT_TRUE(failed.ok());
  EXPECT_FALSE(*failed);
  EXPECT_TRUE(group_->ClearFailure().ok()) << "clearing nothing is no error";
  j = GroupStatusJson(config_, *store_);
  ASSERT_TRUE(j.ok());
  EXPECT_TRUE((*j)["failed"].is_null());
}

TEST_F(GroupRecordsTest, TheSettingsDigestChangesWithTheJobsSettingsOnly) {
  const std::string digest = SettingsDigest(config_);
  EXPECT_EQ(digest.size(), 64u);
  Config other_node = config_;
  other_node.checkpoint_dir = "/data/elsewhere";
  other_node.imds.endpoint = "http://127.0.0.1:9999";
  other_node.group.address = "10.1.2.3";
  EXPECT_EQ(SettingsDigest(other_node), digest) << "what differs from node to node";
  Config fixed = config_;
  fixed.command.push_back("--fixed");
  EXPECT_NE(SettingsDigest(fixed), digest);
  Config more_restarts = config_;
  more_restarts.restart.max = 9;
  EXPECT_NE(SettingsDigest(more_restarts), digest);
  EXPECT_EQ(digest.find("SG-SECRET-1"), std::string::npos);
}

TEST_F(GroupRecordsTest, TheCommandsSecretsReachNoRecordAndAreComparedByDigest) {
  const MemberRecord self = OwnRecord(config_, "i-0", "a-0", "10.0.0.0");
  const std::string json = MemberToJson(self);
  EXPECT_EQ(json.find("SG-SECRET-1"), std::string::npos) << json;
  EXPECT_EQ(json.find("hunter2"), std::string::npos) << json;
  EXPECT_NE(json.find("--api-key=<redacted>"), std::string::npos) << json;
  ASSERT_TRUE(group_->WriteMember(self).ok());
  auto members = group_->Members();
  ASSERT_TRUE(members.ok());
  ASSERT_EQ(members->size(), 1u);
  EXPECT_EQ(ConfigDifference(members->begin()->second.second, self), std::nullopt);

  // Another secret: a difference, named without either secret.
  Config other = config_;
  other.command[2] = "--api-key=SG-SECRET-2";
  const MemberRecord member = OwnRecord(other, "i-1", "a-1", "10.0.0.1");
  auto diff = ConfigDifference(member, self);
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->find("SG-SECRET"), std::string::npos) << *diff;
  EXPECT_NE(diff->find("differ in a redacted argument"), std::string::npos) << *diff;
  ASSERT_TRUE(group_->Refuse(member.agent, *diff).ok());
  auto refusal = group_->Refusal(member.agent);
  ASSERT_TRUE(refusal.ok() && *refusal);
  EXPECT_EQ((*refusal)->find("SG-SECRET"), std::string::npos);

  // A record of an older agent, its command in clear: read back redacted,
  // and compared by the digest of what it held.
  nlohmann::json old = nlohmann::json::parse(json);
  old.erase("command_sha256");
  old["command"] = config_.command;
  auto parsed = ParseMember(old.dump(), "old");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->command, self.command);
  EXPECT_EQ(ConfigDifference(*parsed, self), std::nullopt);
}

TEST_F(GroupRecordsTest, AGroupDoesNotSilentlyStartOverAJobThatRanOnOneNode) {
  config_.nodes = 2;
  EXPECT_TRUE(CheckGroupStart(*store_, config_).ok()) << "a new job";
  ASSERT_TRUE(CommitTree({{"step_40.pt", {"weights", 0644}}}, {}, 40).ok());
  Status st = CheckGroupStart(*store_, config_);
  EXPECT_TRUE(st.Is(StatusCode::kInvalidArgument)) << st.ToString();
  EXPECT_NE(st.message().find("holds 1 single-node snapshot(s) (the newest: 0000000001, step 40) "
                              "and no group snapshot, and this config says nodes: 2"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("group.from_single"), std::string::npos) << st.message();
  config_.group.from_single = FromSingle::kFresh;
  EXPECT_TRUE(CheckGroupStart(*store_, config_).ok());
  // Once the group has a snapshot of its own, the single-node ones are history.
  config_.group.from_single = FromSingle::kRefuse;
  ASSERT_TRUE(group_->CommitGroup(Group(1, 50)).ok());
  EXPECT_TRUE(CheckGroupStart(*store_, config_).ok());
}

// The digest's primitive against RFC 7914 section 11's PBKDF2-HMAC-SHA-256 vector.
// A group flush's records (docs/design.md §14): one per warned rank and
// round, create-only, so a second warning of the same rank asks no one twice,
// and another round's records are not this round's.
TEST_F(GroupRecordsTest, AFlushIsRecordedOncePerRankAndRound) {
  EXPECT_TRUE(group_->Flushes(3)->empty());
  ASSERT_TRUE(group_->MarkFlush(3, 1, 40).ok());
  ASSERT_TRUE(group_->MarkFlush(3, 0, std::nullopt).ok());
  // A second warning of rank 1 is no error, and changes nothing (create-only).
  EXPECT_TRUE(group_->MarkFlush(3, 1, 50).ok());
  auto flushes = group_->Flushes(3);
  ASSERT_TRUE(flushes.ok()) << flushes.status().message();
  const std::map<int, std::optional<int64_t>> want = {{0, std::nullopt}, {1, 40}};
  EXPECT_EQ(*flushes, want);
  EXPECT_TRUE(group_->Flushes(4)->empty());
  EXPECT_TRUE(store_->Head("job/group/rounds/0000000003/flush/1.json").ok());
}

}  // namespace
}  // namespace sg::testing
