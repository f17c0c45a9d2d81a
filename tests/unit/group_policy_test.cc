// The group policy (agent/group/group_policy.h): the round protocol's
// decisions, fed plain values (a look's reads, the node's facts, the time)
// and answered with actions. No store, clock, process or file.
#include "agent/group/group_policy.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "agent/config/exit_codes.h"

namespace sg::testing {
namespace group_policy_test {

namespace ga = group_action;
using std::chrono::milliseconds;
using Members = std::map<std::string, std::pair<std::string, MemberRecord>>;

MemberRecord Member(const std::string& name) {
  MemberRecord m;
  m.instance = "i-" + name;
  m.agent = name;
  m.address = "10.0.0." + name;
  m.job = "job";
  m.nodes = 2;
  m.command = {"train"};
  m.command_digest = "d";
  return m;
}

Members Listed(const std::vector<MemberRecord>& members, uint64_t beat = 1) {
  Members out;
  for (MemberRecord m : members) {
    m.beat = beat;
    out[m.instance] = {"etag-" + std::to_string(beat), m};
  }
  return out;
}

GroupPolicyOptions Options() {
  GroupPolicyOptions o;
  o.nodes = 2;
  o.restart_max = 1;
  o.restart_backoff = milliseconds(0);
  o.member_timeout = milliseconds(6'000);
  o.settings = "settings-a";
  o.instance = "i-a";
  o.job = "job";
  return o;
}

RoundPlan Plan(uint64_t round, std::optional<uint64_t> resume = std::nullopt) {
  RoundPlan p;
  p.round = round;
  p.nodes = 2;
  p.members = {{"i-a", "a", "10.0.0.a"}, {"i-b", "b", "10.0.0.b"}};
  p.resume_seq = resume;
  return p;
}

GroupCommit Group(uint64_t seq, uint64_t round, int64_t step) {
  GroupCommit g;
  g.seq = seq;
  g.round = round;
  g.nodes = 2;
  g.step = step;
  g.parts = {PartRecord{0, step, seq, "i-a", 1, 1}, PartRecord{1, step, seq, "i-b", 1, 1}};
  return g;
}

// A look read while waiting, by the coordinator.
GroupView Waiting(const Members& members, std::optional<RoundPlan> newest,
                  std::vector<RoundEnd> ends = {}, std::vector<GroupCommit> groups = {}) {
  GroupView v;
  v.waiting = true;
  v.coordinating = true;
  v.members = members;
  v.refusal = std::optional<std::string>();
  v.failed = std::optional<FailureRecord>();
  PlanListing plans;
  plans.newest = newest;
  plans.newest_round = newest ? newest->round : 0;
  v.plans = plans;
  if (newest) v.ends = ends;
  GroupListing listing;
  listing.groups = groups;
  listing.newest_seq = groups.empty() ? 0 : groups.back().seq;
  v.groups = listing;
  v.suspects = std::set<uint64_t>();
  v.quarantined = std::map<uint64_t, std::vector<std::string>>();
  return v;
}

GroupView InRoundView(const Members& members, uint64_t round, std::vector<RoundEnd> ends,
                      std::vector<PartRecord> parts, std::vector<GroupCommit> groups = {}) {
  GroupView v;
  v.round = round;
  v.coordinating = true;
  v.members = members;
  v.ends = ends;
  v.parts = parts;
  GroupListing listing;
  listing.groups = groups;
  listing.newest_seq = groups.empty() ? 0 : groups.back().seq;
  v.groups = listing;
  v.done = std::map<int, std::optional<int64_t>>();
  return v;
}

GroupFacts Coordinating(GroupFacts::Phase phase = GroupFacts::Phase::kWaiting,
                        std::optional<RoundPlan> plan = std::nullopt) {
  GroupFacts f;
  f.phase = phase;
  f.plan = plan;
  f.coordinating = true;
  f.generation = 7;
  return f;
}

template <typename T>
std::vector<T> All(const GroupActions& actions) {
  std::vector<T> out;
  for (const GroupAction& act : actions) {
    if (const auto* x = std::get_if<T>(&act)) out.push_back(*x);
  }
  return out;
}

const Clock::MonoTime kT0{};

TEST(GroupPolicy, TheCoordinatorPlansRoundOneOnceEnoughMembersAreFresh) {
  GroupPolicy p(Options(), Member("a"));
  // Alone: not enough members, nothing planned.
  EXPECT_TRUE(All<ga::WritePlan>(p.OnView(kT0, Waiting(Listed({Member("a")}), {}), Coordinating()))
                  .empty());
  const auto plans = All<ga::WritePlan>(
      p.OnView(kT0, Waiting(Listed({Member("a"), Member("b")}), {}), Coordinating()));
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].plan.round, 1u);
  EXPECT_EQ(plans[0].plan.generation, 7u);
  ASSERT_EQ(plans[0].plan.members.size(), 2u);
  EXPECT_EQ(plans[0].plan.members[0].agent, "a") << "the coordinator is rank 0";
  EXPECT_FALSE(plans[0].plan.resume_seq.has_value());
}

TEST(GroupPolicy, AMemberNamedInAPlanThatHasNotEndedJoinsItWithItsGroupSnapshot) {
  GroupPolicy p(Options(), Member("b"));
  GroupView v = Waiting(Listed({Member("a"), Member("b")}), Plan(3, 2), {},
                        {Group(1, 1, 5), Group(2, 2, 10)});
  v.coordinating = false;
  GroupFacts f = Coordinating();
  f.coordinating = false;
  const auto joins = All<ga::Join>(p.OnView(kT0, v, f));
  ASSERT_EQ(joins.size(), 1u);
  EXPECT_EQ(joins[0].plan.round, 3u);
  ASSERT_TRUE(joins[0].group.has_value());
  EXPECT_EQ(joins[0].group->seq, 2u);
}

TEST(GroupPolicy, ALookReadForARoundThatHasPassedIsNotActedOn) {
  GroupPolicy p(Options(), Member("a"));
  const GroupView v = InRoundView(Listed({Member("a"), Member("b")}), 4,
                                  {RoundEnd{"crash", "i-b", ""}}, {});
  EXPECT_TRUE(p.OnView(kT0, v, Coordinating(GroupFacts::Phase::kInRound, Plan(5))).empty());
  EXPECT_TRUE(p.OnView(kT0, v, Coordinating(GroupFacts::Phase::kWaiting)).empty());
  EXPECT_FALSE(p.OnView(kT0, v, Coordinating(GroupFacts::Phase::kInRound, Plan(4))).empty());
}

TEST(GroupPolicy, EndsOfTheRoundAskForACheckpointOrStopAtOnce) {
  GroupPolicy p(Options(), Member("a"));
  const Members m = Listed({Member("a"), Member("b")});
  auto asked = p.OnView(kT0, InRoundView(m, 1, {RoundEnd{"notice", "i-b", ""}}, {}),
                        Coordinating(GroupFacts::Phase::kInRound, Plan(1)));
  ASSERT_EQ(All<ga::AskForCheckpoint>(asked).size(), 1u);
  EXPECT_EQ(All<ga::AskForCheckpoint>(asked)[0].deadline, kT0 + milliseconds(100'000));
  // Another member's notice is named, for the checkpoint cadence's rate.
  EXPECT_EQ(All<ga::AskForCheckpoint>(asked)[0].warned, "i-b");
  auto own = GroupPolicy(Options(), Member("a"))
                 .OnView(kT0, InRoundView(m, 1, {RoundEnd{"stop", "i-b", ""}}, {}),
                         Coordinating(GroupFacts::Phase::kInRound, Plan(1)));
  ASSERT_EQ(All<ga::AskForCheckpoint>(own).size(), 1u);
  EXPECT_EQ(All<ga::AskForCheckpoint>(own)[0].warned, "") << "a SIGTERM warns of no interruption";
  auto left = p.OnView(kT0, InRoundView(m, 1, {RoundEnd{"crash", "i-b", "exit 3"}}, {}),
                       Coordinating(GroupFacts::Phase::kInRound, Plan(1)));
  ASSERT_EQ(All<ga::Leave>(left).size(), 1u);
  EXPECT_EQ(All<ga::Leave>(left)[0].why, "round 1 ended: crash on i-b (exit 3)");
  EXPECT_TRUE(All<ga::Commit>(left).empty());
}

TEST(GroupPolicy, EveryRanksPartOfOneStepIsCommittedOnceAboveEveryListedSeq) {
  GroupPolicy p(Options(), Member("a"));
  const Members m = Listed({Member("a"), Member("b")});
  const std::vector<PartRecord> parts = {PartRecord{0, 10, 4, "i-a", 1, 1},
                                         PartRecord{1, 10, 6, "i-b", 1, 1}};
  GroupView v = InRoundView(m, 2, {}, parts, {Group(3, 1, 5)});
  v.groups->value().newest_seq = 5;  // a damaged record above the newest readable one
  const auto facts = Coordinating(GroupFacts::Phase::kInRound, Plan(2));
  const auto commits = All<ga::Commit>(p.OnView(kT0, v, facts));
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_EQ(commits[0].group.seq, 6u);
  EXPECT_EQ(commits[0].group.step, 10);
  EXPECT_EQ(commits[0].group.generation, 7u);
  // A look that comes back while the commit runs commits nothing more.
  EXPECT_TRUE(All<ga::Commit>(p.OnView(kT0, v, facts)).empty());
  const GroupActions done = p.OnCommitted(commits[0].group, Status::Ok());
  EXPECT_EQ(All<ga::Retain>(done).size(), 1u);
  ASSERT_EQ(All<ga::Event>(done).size(), 1u);
  EXPECT_EQ(All<ga::Event>(done)[0].kind, "snapshot");
}

TEST(GroupPolicy, AMemberWhoseRecordStopsChangingEndsTheRoundStale) {
  GroupPolicy p(Options(), Member("a"));
  const auto facts = Coordinating(GroupFacts::Phase::kInRound, Plan(1));
  EXPECT_TRUE(All<ga::EndRound>(p.OnView(kT0, InRoundView(Listed({Member("a"), Member("b")}, 1), 1,
                                                         {}, {}),
                                        facts))
                  .empty());
  // b's record is the same 6 s later; a's changed.
  Members later = Listed({Member("a")}, 2);
  later["i-b"] = Listed({Member("b")}, 1)["i-b"];
  const auto ends = All<ga::EndRound>(
      p.OnView(kT0 + milliseconds(6'001), InRoundView(later, 1, {}, {}), facts));
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].end.reason, "stale");
  EXPECT_EQ(ends[0].round, 1u);
}

TEST(GroupPolicy, AMemberThatLeftWithANoticeIsNotTakenForAMemberGoneStale) {
  GroupPolicy p(Options(), Member("a"));
  const auto facts = Coordinating(GroupFacts::Phase::kInRound, Plan(1));
  EXPECT_TRUE(p.OnView(kT0, InRoundView(Listed({Member("a"), Member("b")}), 1, {}, {}), facts)
                  .size() <= 1);
  // b wrote its notice, then left the membership: its record is gone.
  const GroupActions out = p.OnView(
      kT0, InRoundView(Listed({Member("a")}), 1, {RoundEnd{"notice", "i-b", ""}}, {}), facts);
  EXPECT_EQ(All<ga::AskForCheckpoint>(out).size(), 1u);
  EXPECT_TRUE(All<ga::EndRound>(out).empty()) << "the round ends `notice`, not `stale`";
}

TEST(GroupPolicy, TheAnswerIsNamedAndCompletionComesOnceEveryRankIsDoneAndCommitted) {
  GroupPolicy p(Options(), Member("a"));
  const Members m = Listed({Member("a"), Member("b")});
  GroupView v = InRoundView(m, 1, {RoundEnd{"notice", "i-b", ""}}, {}, {Group(1, 1, 15)});
  v.asked = std::map<int, std::optional<int64_t>>{{0, 10}, {1, 12}};
  const auto answers =
      All<ga::NameAnswer>(p.OnView(kT0, v, Coordinating(GroupFacts::Phase::kEnding, Plan(1))));
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].seq, 1u);
  EXPECT_EQ(answers[0].step, 15);

  GroupView done = InRoundView(m, 1, {}, {}, {Group(1, 1, 15)});
  done.done = std::map<int, std::optional<int64_t>>{{0, 15}, {1, 20}};
  const auto facts = Coordinating(GroupFacts::Phase::kInRound, Plan(1));
  EXPECT_TRUE(All<ga::Complete>(p.OnView(kT0, done, facts)).empty()) << "rank 1's 20 is not in";
  done.done = std::map<int, std::optional<int64_t>>{{0, 15}, {1, 15}};
  const auto complete = All<ga::Complete>(p.OnView(kT0, done, facts));
  ASSERT_EQ(complete.size(), 1u);
  EXPECT_EQ(complete[0].seq, 1u);
  EXPECT_EQ(All<ga::JobComplete>(p.OnCompleted(Status::Ok())).size(), 1u);
}

TEST(GroupPolicy, CrashRoundsPastRestartMaxFailTheJob) {
  GroupPolicy p(Options(), Member("a"));  // restart.max 1
  const Members m = Listed({Member("a"), Member("b")});
  const std::vector<RoundEnd> crash = {RoundEnd{"crash", "i-b", "exit 3"}};
  EXPECT_EQ(All<ga::WritePlan>(p.OnView(kT0, Waiting(m, Plan(1), crash), Coordinating())).size(), 1u);
  const GroupActions second = p.OnView(kT0, Waiting(m, Plan(2), crash), Coordinating());
  EXPECT_TRUE(All<ga::WritePlan>(second).empty());
  ASSERT_EQ(All<ga::MarkFailed>(second).size(), 1u);
  EXPECT_EQ(All<ga::MarkFailed>(second)[0].failure.round, 2u);
  EXPECT_EQ(All<ga::MarkFailed>(second)[0].failure.settings, "settings-a");
  ASSERT_EQ(All<ga::Exit>(second).size(), 1u);
  EXPECT_EQ(All<ga::Exit>(second)[0].code, kExitFailure);
  EXPECT_TRUE(p.OnView(kT0, Waiting(m, Plan(2), crash), Coordinating()).empty())
      << "nothing after the exit";
}

TEST(GroupPolicy, AFailureOfOtherSettingsIsClearedAndOfTheSameSettingsExitsOne) {
  const Members m = Listed({Member("a"), Member("b")});
  GroupPolicy same(Options(), Member("a"));
  GroupView v = Waiting(m, {});
  v.failed = std::optional<FailureRecord>(FailureRecord{"crashes", "", 4, "settings-a"});
  EXPECT_EQ(All<ga::Exit>(same.OnView(kT0, v, Coordinating()))[0].code, kExitFailure);

  GroupPolicy other(Options(), Member("a"));
  v.failed = std::optional<FailureRecord>(FailureRecord{"crashes", "", 4, "settings-b"});
  const GroupActions cleared = other.OnView(kT0, v, Coordinating());
  ASSERT_EQ(All<ga::ClearFailure>(cleared).size(), 1u);
  EXPECT_TRUE(All<ga::WritePlan>(cleared).empty()) << "planned on the next look";
  const auto events = All<ga::Event>(other.OnFailureCleared(FailureRecord{"crashes", "", 4, "b"},
                                                           Status::Ok()));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "failure-cleared");
}

TEST(GroupPolicy, ARefusedMemberExitsTwoAndTheCoordinatorRefusesOnceWithTheKeyNamed) {
  GroupPolicy member(Options(), Member("b"));
  GroupView v = Waiting(Listed({Member("a"), Member("b")}), {});
  v.refusal = std::optional<std::string>("nodes: 3 here, 2 on the coordinator");
  EXPECT_EQ(All<ga::Exit>(member.OnView(kT0, v, Coordinating()))[0].code, kExitUsage);

  GroupPolicy coordinator(Options(), Member("a"));
  MemberRecord odd = Member("c");
  odd.nodes = 3;
  const GroupView w = Waiting(Listed({Member("a"), odd}), {});
  const auto refused = All<ga::Refuse>(coordinator.OnView(kT0, w, Coordinating()));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].agent, "c");
  EXPECT_NE(refused[0].why.find("nodes"), std::string::npos) << refused[0].why;
  EXPECT_TRUE(All<ga::Refuse>(coordinator.OnView(kT0, w, Coordinating())).empty());
}

TEST(GroupPolicy, TwoFailedRoundsFromOneGroupSnapshotMarkItSuspectBeforeTheNextPlan) {
  GroupPolicyOptions o = Options();
  o.restart_max = 5;
  GroupPolicy p(o, Member("a"));
  const Members m = Listed({Member("a"), Member("b")});
  const std::vector<RoundEnd> crash = {RoundEnd{"crash", "i-b", "exit 3"}};
  const std::vector<GroupCommit> groups = {Group(1, 1, 5), Group(2, 1, 10)};
  EXPECT_TRUE(All<ga::MarkSuspect>(p.OnView(kT0, Waiting(m, Plan(2, 2), crash, groups),
                                           Coordinating()))
                  .empty());
  const GroupActions second = p.OnView(kT0, Waiting(m, Plan(3, 2), crash, groups), Coordinating());
  ASSERT_EQ(All<ga::MarkSuspect>(second).size(), 1u);
  EXPECT_EQ(All<ga::MarkSuspect>(second)[0].seq, 2u);
  EXPECT_TRUE(All<ga::WritePlan>(second).empty()) << "the next look reads the mark first";
  // That look: group snapshot 2 suspect, the next round resumes from 1.
  GroupView next = Waiting(m, Plan(3, 2), crash, groups);
  next.suspects = std::set<uint64_t>{2};
  const auto plans = All<ga::WritePlan>(p.OnView(kT0, next, Coordinating()));
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].plan.resume_seq, std::optional<uint64_t>(1));
  EXPECT_EQ(plans[0].plan.round, 4u);
}

// A group snapshot any of whose parts needs a quarantined object is passed
// over by the coordinator's plan, as a suspect one is (docs/design.md §14,
// "Quarantine in a group"); the plan names the one every member restores.
TEST(GroupPolicy, ARoundNeverResumesFromAGroupSnapshotThatNeedsAQuarantinedObject) {
  const Members m = Listed({Member("a"), Member("b")});
  const std::vector<RoundEnd> notice = {RoundEnd{"notice", "i-b", ""}};
  const std::vector<GroupCommit> groups = {Group(1, 1, 5), Group(2, 1, 10), Group(3, 1, 15)};
  const std::string damaged = "nodes/1/snapshots/0000000002/files/step_10.pt.zst";
  GroupPolicy p(Options(), Member("a"));
  GroupView v = Waiting(m, Plan(1), notice, groups);
  v.quarantined = Status::Unavailable("not now");
  EXPECT_TRUE(All<ga::WritePlan>(p.OnView(kT0, v, Coordinating())).empty())
      << "no plan while the quarantine is not known";
  // Group snapshot 3 needs the object 2 stored: both are passed over.
  v.quarantined = std::map<uint64_t, std::vector<std::string>>{{2, {damaged}}, {3, {damaged}}};
  const GroupActions acts = p.OnView(kT0, v, Coordinating());
  const auto plans = All<ga::WritePlan>(acts);
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].plan.resume_seq, std::optional<uint64_t>(1));
  EXPECT_EQ(plans[0].plan.resume_step, std::optional<int64_t>(5));
  const auto logs = All<ga::Log>(acts);
  EXPECT_TRUE(std::any_of(logs.begin(), logs.end(), [&](const ga::Log& l) {
    return l.message.find(
               "passes over group snapshot 0000000003: it needs the quarantined "
               "object(s) " +
               damaged) != std::string::npos;
  }));
  // Every group snapshot needs one: the job fails rather than start fresh.
  GroupPolicy q(Options(), Member("a"));
  v.quarantined =
      std::map<uint64_t, std::vector<std::string>>{{1, {damaged}}, {2, {damaged}}, {3, {damaged}}};
  const GroupActions failed = q.OnView(kT0, v, Coordinating());
  EXPECT_TRUE(All<ga::WritePlan>(failed).empty());
  ASSERT_EQ(All<ga::MarkFailed>(failed).size(), 1u);
  EXPECT_NE(All<ga::MarkFailed>(failed)[0].failure.why.find("needs a quarantined object"),
            std::string::npos);
}

}  // namespace group_policy_test
}  // namespace sg::testing
