// Group behaviours on the fake multi-node world (tests/support/fake_group_world.h):
// real group agents, one in-memory store, one fake clock, fake trainers that
// step together. No process, socket or sleep: each test runs minutes of the
// group's time in milliseconds, and the same way on every run.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>

#include "agent/config/exit_codes.h"
#include "agent/ledger/goodput.h"
#include "agent/ledger/ledger.h"
#include "agent/repo/group_store.h"
#include "agent/repo/group_suspect.h"
#include "agent/repo/quarantine.h"
#include "agent/repo/round_backups.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/store_layout.h"
#include "common/files.h"
#include "tests/support/group_records.h"
#include "tests/support/group_world_checks.h"

namespace sg::testing {
namespace {

using namespace std::chrono_literals;

TEST(GroupWorld, ANoticeCommitsTheGroupAndAReplacementResumesItToTheSameResult) {
  FakeGroupWorld w(2);
  w.trainer.steps = 60;
  w.StartAll();
  w.At(6s, [&] { w.node(1).imds->PostNotice(120s); });
  ASSERT_TRUE(w.RunUntilExited(120s, {1}));
  EXPECT_EQ(w.node(1).result.exit_code, kExitInterrupted);
  const std::optional<int64_t> saved = w.NewestGroupStep();
  ASSERT_TRUE(saved.has_value());
  EXPECT_GT(*saved, 0);
  EXPECT_LT(*saved, 60);
  // The noticed node's trainer was asked for a checkpoint, then stopped.
  EXPECT_EQ(w.node(1).signals.front(), SIGUSR1);
  // The Auto Scaling group replaces the instance.
  const std::string noticed = w.node(1).instance;
  w.Start(1);
  ASSERT_TRUE(w.RunUntilExited(300s));
  EXPECT_EQ(w.node(0).result.exit_code, kExitOk);
  EXPECT_EQ(w.node(1).result.exit_code, kExitOk);
  EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 60));
  // The replacement resumed from the group snapshot, not from step 0.
  ASSERT_FALSE(w.node(1).launches.empty());
  EXPECT_FALSE(w.node(1).launches.front().resume.empty());
  // The survivor's ledger holds both its rounds, the first ended (round-end),
  // so the wait between them is not counted as training.
  auto events = ReadJobEvents(w.store, "job");
  ASSERT_TRUE(events.ok());
  const Ledger ledger = BuildLedger(*events);
  const auto survivor =
      std::find_if(ledger.attempts.begin(), ledger.attempts.end(),
                   [&](const LedgerAttempt& a) { return a.instance == w.node(0).instance; });
  ASSERT_NE(survivor, ledger.attempts.end());
  ASSERT_EQ(survivor->rounds.size(), 2u);
  EXPECT_TRUE(survivor->rounds[0].end.has_value());
  EXPECT_TRUE(survivor->rounds[1].restore_start.has_value());
  // Every attempt ends with its exit event; the replacement is in the
  // noticed node's lane (it took its rank), the survivor in its own.
  ASSERT_EQ(ledger.attempts.size(), 3u);
  std::string noticed_lane, replacement_lane;
  for (const LedgerAttempt& a : ledger.attempts) {
    EXPECT_EQ(a.exit_reason, a.instance == noticed ? "notice" : "complete") << a.id;
    if (a.instance == noticed) noticed_lane = a.node;
    if (a.instance == w.node(1).instance) replacement_lane = a.node;
  }
  EXPECT_EQ(replacement_lane, noticed_lane);
  EXPECT_NE(survivor->node, noticed_lane);
  // The noticed node's request, its answer and its trainer's stop; the
  // survivor's trainer finishing: what goodput's causes and the checkpoint
  // cost are computed from.
  for (const LedgerAttempt& a : ledger.attempts) {
    if (a.instance != noticed) continue;
    EXPECT_FALSE(a.requests.empty());
    ASSERT_FALSE(a.answers.empty());
    EXPECT_TRUE(a.answers.front().answered);
    EXPECT_TRUE(a.trainer_stop.has_value());
  }
  EXPECT_TRUE(survivor->trainer_exit.has_value());
  EXPECT_GE(ComputeGoodput(ledger).checkpoint.samples, 1);
}

TEST(GroupWorld, ACrashOnOneNodeEndsTheRoundAndTheNextResumesFromTheGroupSnapshot) {
  FakeGroupWorld w(3);
  w.trainer.steps = 30;
  w.trainer.fail_at = 17;
  w.trainer.fail_rank = 1;
  w.trainer.fail_once = true;
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return !FirstEnd(w, 1).empty(); }, 60s));
  EXPECT_EQ(FirstEnd(w, 1), "crash");
  const std::optional<int64_t> committed = w.NewestGroupStep();
  ASSERT_TRUE(committed.has_value());
  ASSERT_TRUE(w.RunUntilExited(300s));
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(w.node(s).result.exit_code, kExitOk) << s;
    // Round 1 fresh, round 2 from the newest group snapshot when round 1 ended.
    ASSERT_EQ(w.node(s).launches.size(), 2u) << s;
    EXPECT_TRUE(w.node(s).launches[0].resume.empty());
    EXPECT_NE(w.node(s).launches[1].resume.find("step_" + std::to_string(*committed) + ".pt"),
              std::string::npos)
        << w.node(s).launches[1].resume;
  }
  EXPECT_EQ(Finals(w, 3), ExpectedFinals(3, 30));
  ExpectWholeGroupSnapshots(w, 3);
}

TEST(GroupWorld, ATrainerThatAlwaysCrashesFailsTheJobOnEveryNodeAfterRestartMax) {
  FakeGroupWorld w(2, {{"restart.backoff", "2s"}, {"restart.max_backoff", "3s"}});
  w.trainer.fail_at = 3;
  w.StartAll();
  ASSERT_TRUE(w.RunUntilExited(300s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).result.exit_code, kExitFailure) << s;
  // restart.max is 2: rounds 1, 2 and 3 crashed, and no fourth was planned.
  EXPECT_EQ(w.NewestRound(), 3u);
  // Crash restarts back off as a single node's do: 2 s, then doubled up to 3 s
  // (the store's times are the world's clock).
  auto first_modified = [&](const std::string& prefix) {
    auto listed = ListAll(w.store, prefix);
    EXPECT_TRUE(listed.ok() && !listed->empty()) << prefix;
    return listed.ok() && !listed->empty() ? listed->front().modified : Clock::WallTime{};
  };
  for (uint64_t round : {1u, 2u}) {
    const auto ended = first_modified("job/group/rounds/" + SeqName(round) + "/end/");
    const auto planned = first_modified("job/group/rounds/" + SeqName(round + 1) + "/plan.json");
    EXPECT_GE(planned - ended, round == 1 ? 2s : 3s) << "round " << round + 1;
    EXPECT_LT(planned - ended, round == 1 ? 3s : 4s) << "round " << round + 1;
  }
  auto failed = GroupStore(w.store, "job").Failed();
  ASSERT_TRUE(failed.ok() && failed->has_value());
  EXPECT_NE((*failed)->why.find("3 rounds in a row"), std::string::npos) << (*failed)->why;
  // A node that boots into the failed job does not start it again.
  w.Start(0);
  ASSERT_TRUE(w.RunUntilExited(60s, {0}));
  EXPECT_EQ(w.node(0).result.exit_code, kExitFailure);
  EXPECT_TRUE(w.node(0).launches.empty());
}

TEST(GroupWorld, AGroupSnapshotOfAnotherNodeCountIsRefusedAtTheStart) {
  FakeGroupWorld w(3);
  ASSERT_TRUE(GroupStore(w.store, "job").CommitGroup(RecordOnlyGroupCommit(2, 10)).ok());
  w.StartAll();
  // The coordinator refuses (exit 2), and so does each node that takes the lease after it.
  ASSERT_TRUE(w.RunUntilExited(120s));
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(w.node(s).result.exit_code, kExitUsage) << s;
    EXPECT_TRUE(w.node(s).launches.empty()) << "nothing started fresh";
  }
  EXPECT_EQ(w.NewestRound(), 0u);
}

TEST(GroupWorld, AMemberWhoseSettingsDifferIsRefusedWithTheKeyNamed) {
  FakeGroupWorld w(2);
  w.Start(0);
  w.RunUntil([&] { return w.Coordinator().has_value(); }, 30s);
  w.Start(1, {{"command_arg", "--save-every=7"}});
  ASSERT_TRUE(w.RunUntilExited(60s, {1}));
  EXPECT_EQ(w.node(1).result.exit_code, kExitUsage);
  EXPECT_TRUE(w.node(1).launches.empty());
  auto listed = ListAll(w.store, "job/group/refused/");
  ASSERT_TRUE(listed.ok() && listed->size() == 1u);
  auto body = w.store.Get(listed->front().key);
  ASSERT_TRUE(body.ok());
  EXPECT_NE(body->find("command: ["), std::string::npos) << *body;
  EXPECT_NE(body->find("--save-every=7"), std::string::npos) << *body;
  EXPECT_FALSE(w.node(0).done) << "the coordinator waits for a member with its settings";
}

TEST(GroupWorld, AMemberLostWithoutANoticeEndsTheRoundStaleAndItsReplacementResumes) {
  FakeGroupWorld w(2);
  w.trainer.steps = 50;
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return w.NewestGroupStep() >= 10; }, 60s));
  const int coordinator = *w.Coordinator();
  const int lost = 1 - coordinator;
  w.Kill(lost);
  ASSERT_TRUE(w.RunUntil([&] { return !FirstEnd(w, 1).empty(); }, 30s));
  EXPECT_EQ(FirstEnd(w, 1), "stale");
  EXPECT_FALSE(w.node(coordinator).done) << "the survivor waits for a replacement";
  w.Start(lost);
  ASSERT_TRUE(w.RunUntilExited(300s, {0, 1}));
  EXPECT_EQ(w.node(0).result.exit_code, kExitOk);
  EXPECT_EQ(w.node(1).result.exit_code, kExitOk);
  EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 50));
  ExpectWholeGroupSnapshots(w, 2);
}

TEST(GroupWorld, TheCoordinatorLostAtAnyStepOfAGroupCommitLeavesOnlyWholeSnapshots) {
  // Each write a coordinator makes around a group snapshot, lost just before it lands.
  for (const std::string step : {"lease", "groups/", "-snapshot.json", "final.json", "complete"}) {
    SCOPED_TRACE("the coordinator dies at its write of " + step);
    FakeGroupWorld w(2);
    w.trainer.steps = 30;
    w.StartAll();
    ASSERT_TRUE(w.RunUntil([&] { return w.NewestGroupStep() >= 5; }, 60s));
    const int coordinator = *w.Coordinator();
    w.KillAtPutOf(coordinator, step);
    if (step == "final.json") w.node(1 - coordinator).imds->PostNotice(120s);
    ASSERT_TRUE(w.RunUntil([&] { return w.node(coordinator).dead; }, 120s));
    w.Start(coordinator);
    if (step == "final.json") w.Start(1 - coordinator);  // the noticed node left
    ASSERT_TRUE(w.RunUntilExited(600s, {0, 1}));
    EXPECT_EQ(w.node(0).result.exit_code, kExitOk);
    EXPECT_EQ(w.node(1).result.exit_code, kExitOk);
    EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 30));
    ExpectWholeGroupSnapshots(w, 2);
  }
}

TEST(GroupWorld, ANoticeAsksEveryTrainerAndTheAnswerIsTheGroupSnapshotThatEndsTheRound) {
  FakeGroupWorld w(2);
  w.trainer.steps = 200;
  w.trainer.save_every = 0;  // saves only when asked
  w.StartAll();
  w.At(5s, [&] { w.node(1).imds->PostNotice(120s); });
  // No PUT stands between the notice and the round's end: the notice's
  // event is written once the noticed node's trainer is stopped.
  auto notice_events = [&] {
    auto listed = ListAll(w.store, "job/events/");
    EXPECT_TRUE(listed.ok());
    return std::count_if(listed->begin(), listed->end(),
                         [](const ObjectInfo& o) { return o.key.ends_with("-notice.json"); });
  };
  ASSERT_TRUE(w.RunUntil([&] { return !FirstEnd(w, 1).empty(); }, 30s));
  EXPECT_EQ(FirstEnd(w, 1), "notice");
  EXPECT_EQ(notice_events(), 0);
  ASSERT_TRUE(w.RunUntilExited(120s, {1}));
  EXPECT_EQ(w.node(1).result.exit_code, kExitInterrupted);
  EXPECT_EQ(notice_events(), 1);
  // Both trainers were asked, each saved once, and the group snapshot of that step answers.
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).signals.front(), SIGUSR1) << s;
  ASSERT_EQ(w.GroupSeqs().size(), 1u);
  const int64_t answer = *w.NewestGroupStep();
  EXPECT_GE(answer, 15);  // about 5 s of 200 ms steps before the notice
  auto final_record = w.store.Get("job/group/rounds/" + SeqName(1) + "/final.json");
  ASSERT_TRUE(final_record.ok());
  EXPECT_NE(final_record->find("\"step\":" + std::to_string(answer)), std::string::npos)
      << *final_record;
  EXPECT_FALSE(w.node(0).done) << "the other node waits for the next round";
}

TEST(GroupWorld, ANoticeTooLateForAnAnswerEndsTheNodeWithExit74) {
  FakeGroupWorld w(2);
  w.trainer.steps = 200;
  w.trainer.save_every = 0;
  w.StartAll();
  // 8 s left: the round is given up on 10 s before the deadline, at once.
  w.At(5s, [&] { w.node(1).imds->PostNotice(8s); });
  ASSERT_TRUE(w.RunUntilExited(60s, {1}));
  EXPECT_EQ(w.node(1).result.exit_code, kExitNotCommitted);
  EXPECT_TRUE(w.GroupSeqs().empty());
  EXPECT_FALSE(w.node(1).trainer) << "its trainer was stopped";
}

TEST(GroupWorld, AFrozenStoreOnAMemberEndsTheRoundAndTheMemberRejoinsOnceItAnswers) {
  FakeGroupWorld w(2);
  w.trainer.steps = 60;
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return w.NewestGroupStep() >= 5; }, 60s));
  const int member = 1 - *w.Coordinator();
  w.node(member).store->Freeze();
  w.At(w.Elapsed() + 20s, [&] { w.node(member).store->Thaw(); });
  ASSERT_TRUE(w.RunUntil([&] { return !FirstEnd(w, 1).empty(); }, 60s));
  EXPECT_EQ(FirstEnd(w, 1), "stale");
  ASSERT_TRUE(w.RunUntilExited(300s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).result.exit_code, kExitOk) << s;
  EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 60));
  ExpectWholeGroupSnapshots(w, 2);
}

TEST(GroupWorld, AFrozenStoreOnTheCoordinatorHandsTheLeaseToTheOtherNode) {
  FakeGroupWorld w(2);
  w.trainer.steps = 60;
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return w.NewestGroupStep() >= 5; }, 60s));
  const int first = *w.Coordinator();
  w.node(first).store->Freeze();
  ASSERT_TRUE(w.RunUntil([&] { return w.Coordinator() == 1 - first; }, 60s));
  w.node(first).store->Thaw();
  ASSERT_TRUE(w.RunUntilExited(300s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).result.exit_code, kExitOk) << s;
  EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 60));
  ExpectWholeGroupSnapshots(w, 2);
}

TEST(GroupWorld, AGroupSnapshotTheTrainersCannotResumeFromIsMarkedSuspectAndPassedOver) {
  FakeGroupWorld w(2);
  w.trainer.steps = 40;
  w.trainer.fail_at = 27;
  w.trainer.fail_once = true;
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return FirstEnd(w, 1) == "crash"; }, 60s));
  // Whatever round 1 committed last, no trainer can resume from it.
  const std::optional<int64_t> poisoned = w.NewestGroupStep();
  ASSERT_TRUE(poisoned.has_value());
  const uint64_t poisoned_seq = w.GroupSeqs().back();
  w.trainer.poisoned_resume_step = poisoned;
  // Two rounds (resume.max_failures) resumed from it and crashed; then it
  // is marked, with how each round ended.
  ASSERT_TRUE(w.RunUntil([&] { return w.store.Head(GroupSuspectKey("job", poisoned_seq)).ok(); },
                         120s));
  auto suspects = GroupSuspects(w.store, "job");
  ASSERT_TRUE(suspects.ok());
  EXPECT_EQ(*suspects, std::set<uint64_t>{poisoned_seq});
  auto record = w.store.Get(GroupSuspectKey("job", poisoned_seq));
  ASSERT_TRUE(record.ok());
  EXPECT_NE(record->find("crash on "), std::string::npos) << *record;
  EXPECT_EQ(FirstEnd(w, 2), "crash");
  EXPECT_EQ(FirstEnd(w, 3), "crash");
  // The group falls back to the one before it and completes.
  ASSERT_TRUE(w.RunUntilExited(600s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).result.exit_code, kExitOk) << s;
  EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 40));
  const std::string poisoned_file = "step_" + std::to_string(*poisoned) + ".pt";
  for (int s = 0; s < 2; ++s) {
    const auto& launches = w.node(s).launches;
    ASSERT_GE(launches.size(), 4u) << s;
    EXPECT_NE(launches[1].resume.find(poisoned_file), std::string::npos) << launches[1].resume;
    EXPECT_NE(launches[2].resume.find(poisoned_file), std::string::npos) << launches[2].resume;
    EXPECT_FALSE(launches[3].resume.empty()) << "the fallback resumed, not started fresh";
    EXPECT_EQ(launches[3].resume.find(poisoned_file), std::string::npos) << launches[3].resume;
  }
}

TEST(GroupWorld, WhenEveryGroupSnapshotIsSuspectTheJobFailsRatherThanStartFresh) {
  FakeGroupWorld w(2);
  w.trainer.steps = 40;
  w.trainer.fail_at = 12;
  w.trainer.fail_once = true;
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return FirstEnd(w, 1) == "crash"; }, 60s));
  ASSERT_EQ(w.GroupSeqs().size(), 1u) << "one group snapshot, of step 5 or 10";
  w.trainer.poisoned_resume_step = w.NewestGroupStep();
  ASSERT_TRUE(w.RunUntilExited(600s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).result.exit_code, kExitFailure) << s;
  auto failed = GroupStore(w.store, "job").Failed();
  ASSERT_TRUE(failed.ok() && failed->has_value());
  EXPECT_NE((*failed)->why.find("every group snapshot is suspect"), std::string::npos);
  for (int s = 0; s < 2; ++s) {
    const auto& launches = w.node(s).launches;
    for (size_t i = 1; i < launches.size(); ++i) {
      EXPECT_FALSE(launches[i].resume.empty()) << "launch " << i << " started fresh";
    }
  }
}

// A survivor's restore over its own newer files keeps them in a backup beside
// its checkpoint dir; after many interrupted rounds only the newest
// kAgentBackupsKept of those are left (agent/repo/round_backups.h).
TEST(GroupWorld, ASurvivorKeepsOnlyTheNewestBackupsOfItsRounds) {
  FakeGroupWorld w(2);
  w.trainer.steps = 150;
  w.StartAll();
  for (int i = 0; i < 3; ++i) {
    w.At(w.Elapsed() + 6s, [&] { w.node(1).imds->PostNotice(120s); });
    ASSERT_TRUE(w.RunUntilExited(120s, {1})) << i;
    EXPECT_EQ(w.node(1).result.exit_code, kExitInterrupted) << i;
    w.Start(1);
  }
  ASSERT_TRUE(w.RunUntilExited(600s));
  EXPECT_EQ(w.node(0).result.exit_code, kExitOk);
  const std::string prefix = std::filesystem::path(w.node(0).ckpt).filename().string() +
                             ".spotguard-backup-";
  int marked = 0, all = 0;
  for (const auto& e : std::filesystem::directory_iterator(
           std::filesystem::path(w.node(0).ckpt).parent_path())) {
    if (!e.path().filename().string().starts_with(prefix)) continue;
    ++all;
    marked += std::filesystem::exists(e.path() / kAgentBackupMark) ? 1 : 0;
  }
  EXPECT_GE(w.node(0).launches.size(), 4u) << "a restore in every round";
  EXPECT_GE(marked, 1) << "the restores' backups are marked";
  EXPECT_LE(all, kAgentBackupsKept);
}

// A group snapshot whose part needs a quarantined object is passed over by
// the coordinator's plan when a replacement joins: the round resumes from
// the one before it and no member's restore reads the damaged part
// (docs/design.md §14, "Quarantine in a group").
TEST(GroupWorld, AReplacementsRoundPassesOverAGroupSnapshotWithADamagedPart) {
  FakeGroupWorld w(2);
  w.trainer.steps = 60;
  w.StartAll();
  ASSERT_TRUE(w.RunUntil([&] { return w.GroupSeqs().size() >= 2; }, 60s));
  w.node(1).imds->PostNotice(120s);
  ASSERT_TRUE(w.RunUntilExited(120s, {1}));
  auto groups = GroupStore(w.store, "job").Groups();
  ASSERT_TRUE(groups.ok() && groups->size() >= 2);
  const GroupCommit newest = groups->back(), before = (*groups)[groups->size() - 2];
  // Rank 1's part of the newest group snapshot is damaged, and a `verify`
  // quarantined it.
  const std::string part_job = PartJob("job", 1);
  auto m = SnapshotCatalog(w.store, part_job).ReadManifest(newest.parts[1].seq);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::string key = m->files.at(0).frames.at(0).key;
  auto body = w.store.Get(JobPrefix(part_job) + key);
  ASSERT_TRUE(body.ok());
  (*body)[body->size() / 2] ^= 0x20;
  ASSERT_TRUE(w.store.Put(JobPrefix(part_job) + key, *body, PutCondition::None()).ok());
  QuarantineObjects(w.store, part_job, {key}, "verify", newest.parts[1].seq, "damaged");
  const uint64_t ended = w.NewestRound();

  w.Start(1);
  ASSERT_TRUE(w.RunUntil([&] { return w.NewestRound() > ended; }, 120s));
  auto plan = GroupStore(w.store, "job").NewestPlan();
  ASSERT_TRUE(plan.ok() && plan->has_value());
  EXPECT_EQ((*plan)->resume_seq, std::optional<uint64_t>(before.seq))
      << "not " << newest.seq << ", whose part needs the quarantined object";
  ASSERT_TRUE(w.RunUntilExited(300s));
  for (int s = 0; s < 2; ++s) EXPECT_EQ(w.node(s).result.exit_code, kExitOk) << s;
  EXPECT_EQ(Finals(w, 2), ExpectedFinals(2, 60));
  for (uint64_t round = ended + 1; round <= w.NewestRound(); ++round) {
    for (const std::string& reason : w.EndReasons(round)) {
      EXPECT_NE(reason, "restore") << "round " << round << ": no restore read the damaged part";
    }
  }
}

}  // namespace
}  // namespace sg::testing
