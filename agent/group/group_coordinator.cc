// The coordinator's side of the round protocol (docs/design.md §14):
// planning rounds, refusing members whose settings differ, committing group
// snapshots, naming the answer to a request, completion.
#include "agent/group/group_agent_impl.h"

#include <algorithm>
#include <random>
#include <set>

#include "agent/detect/capture.h"
#include "agent/ledger/events.h"
#include "agent/config/exit_codes.h"
#include "agent/repo/group_retention.h"
#include "agent/repo/group_protocol.h"
#include "agent/repo/group_suspect.h"
#include "agent/trainer/restart_backoff.h"
#include "agent/repo/group_store.h"
#include "agent/run/job_end.h"
#include "agent/run/job_ports_real.h"
#include "agent/run/job_start.h"
#include "agent/repo/lease.h"
#include "agent/logs/log_store.h"
#include "agent/detect/presets.h"
#include "agent/repo/restorer.h"
#include "agent/repo/open_store.h"
#include "agent/repo/snapshot_writer.h"
#include "agent/repo/store_layout.h"
#include "agent/trainer/supervisor.h"
#include "agent/trainer/trainer_record.h"
#include "common/autoscaling_client.h"
#include "common/files.h"
#include "common/log.h"
#include "common/signal_names.h"

namespace sg::group_detail {

std::optional<GroupCommit> GroupAgent::NewestGroup(const StatusOr<GroupListing>& listing) {
  if (!listing.ok()) {
    LogWarn("listing the group snapshots failed: {}", listing.status().message());
    return std::nullopt;
  }
  next_group_seq_ = listing->NextSeq();
  if (listing->groups.empty()) return std::nullopt;
  return listing->groups.back();
}

bool GroupAgent::StopsOnFailure(const FailureRecord& failure) {
  if (!failure.settings.empty() && failure.settings != SettingsDigest(cfg_)) {
    LogWarn("job {} failed earlier ({}), and its command or config changed since: clearing the "
            "failure",
            cfg_.job, failure.why);
    // The next look, posted after this call, reads the record gone.
    calls_.Post<Status>([this] { return group_.ClearFailure(); },
                        [this, failure](Status& st) {
                          if (!st.ok()) {
                            LogWarn("clearing the failure failed (will retry): {}", st.message());
                            return;
                          }
                          Event("failure-cleared",
                                {{"why", failure.why}, {"by", "changed settings"}});
                          // The round that failed is not counted again against the new settings.
                          counted_round_ = failure.round;
                          crash_rounds_ = 0;
                        });
    return true;
  }
  LogError("job {} failed: {}{}. To go on, fix the trainer and run `spotguard reset-failure` "
           "with this job's config, or change its command or config; until then every node "
           "exits 1",
           cfg_.job, failure.why, failure.time.empty() ? "" : " (at " + failure.time + ")");
  Exit(kExitFailure);
  return true;
}

void GroupAgent::Waiting(Clock::MonoTime now, const std::optional<RoundPlan>& plan,
                         const GroupView& view) {
  bool ended = false;
  if (plan) {
    const std::optional<bool> read = RoundEnded(*plan, view);
    if (!read) return;
    ended = *read;
  }
  // A suspect mark was just posted: the next look reads it before a round
  // is planned.
  if (std::exchange(suspect_posted_, false)) return;
  if (!coordinating_ || !view.coordinating || (plan && !ended) || now < next_plan_at_) return;
  PlanRound(now, plan, view);
}

std::optional<bool> GroupAgent::RoundEnded(const RoundPlan& plan, const GroupView& view) {
  const auto& ends = *view.ends;
  if (!ends.ok()) return std::nullopt;
  const bool ended = !ends->empty();
  for (const RoundEnd& e : *ends) {
    if (e.reason == "complete") {
      JobComplete();
      return std::nullopt;
    }
    if (e.reason == "restore" && plan.resume_seq) skip_from_ = plan.resume_seq;
  }
  // Rounds in a row that a crash ended (each counted once); any other end resets it.
  if (ended && counted_round_ != plan.round) {
    counted_round_ = plan.round;
    const bool crash = std::any_of(ends->begin(), ends->end(),
                                   [](const RoundEnd& e) { return e.reason == "crash"; });
    crash_rounds_ = crash ? crash_rounds_ + 1 : 0;
    GuardResume(plan, *ends, crash, view);
  }
  if (!ended && plan.RankOf(self_.agent)) {
    Join(plan, view);
    return std::nullopt;
  }
  return ended;
}

void GroupAgent::PlanRound(Clock::MonoTime now, const std::optional<RoundPlan>& plan,
                           const GroupView& view) {
  if (crash_rounds_ > cfg_.restart.max) {
    FailJob(Format("a trainer crashed in {} rounds in a row (restart.max {})", crash_rounds_,
                   cfg_.restart.max),
            plan);
    return;
  }
  // The group snapshot to resume from: the newest one every member could
  // restore and the trainers did not fail to resume from.
  if (!view.groups || !view.groups->ok() || !view.suspects) return;
  const std::vector<GroupCommit>& groups = (*view.groups)->groups;
  const auto& suspects = *view.suspects;
  if (!suspects.ok()) {
    LogWarn("listing the suspect group snapshots failed (will retry): {}",
            suspects.status().message());
    return;
  }
  const std::optional<GroupCommit> from = ResumePoint(groups, skip_from_, *suspects);
  if (!from && ResumePoint(groups, skip_from_)) {
    // Starting fresh would throw every step away: the job fails instead.
    FailJob("every group snapshot is suspect (spotguard unsuspect SEQ clears one)", plan);
    return;
  }
  if (from && from->nodes != cfg_.nodes) {
    LogError("group snapshot {} was made by {} nodes, and this job has nodes: {}; restore it "
             "with nodes: {}, or start the job under another name",
             SeqName(from->seq), from->nodes, cfg_.nodes, from->nodes);
    Exit(kExitUsage);
    return;
  }
  std::vector<MemberRecord> fresh = freshness_.FreshMembers(now);
  // The round's number comes from the plan keys listed: an unreadable plan
  // at the top is passed over, never planned again.
  const uint64_t round = std::max(next_round_, plan ? plan->round + 1 : 1);
  auto next = PlanNextRound(self_, fresh, cfg_.nodes, plan, round,
                            generation_, cfg_.group.port,
                            from ? std::optional<uint64_t>(from->seq) : std::nullopt,
                            from ? std::optional<int64_t>(from->step) : std::nullopt);
  if (!next) return;  // not enough members yet
  // Crash restarts wait as a single node's do (restart.backoff, max_backoff).
  if (const auto wait = RestartBackoff(crash_rounds_, duration_cast<milliseconds>(cfg_.restart.backoff),
                                     duration_cast<milliseconds>(cfg_.restart.max_backoff));
      wait.count() > 0 && next_plan_at_ == Clock::MonoTime{}) {
    next_plan_at_ = now + wait;
    LogInfo("round {} waits {:.1f} s (restart.backoff: {} round(s) in a row ended by a crash)",
            next->round, std::chrono::duration<double>(wait).count(), crash_rounds_);
    return;
  }
  next_plan_at_ = {};
  // The next look, posted after this call, reads the plan.
  calls_.Post<Status>([this, p = *next] { return group_.WritePlan(p); },
                      [p = *next](Status& st) {
                        if (st.ok()) {
                          LogInfo("round {} planned: {} nodes, resuming {}", p.round, p.nodes,
                                  p.resume_seq ? "group snapshot " + SeqName(*p.resume_seq)
                                               : "fresh");
                        } else if (!st.Is(StatusCode::kPreconditionFailed)) {
                          LogWarn("writing the plan of round {} failed: {}", p.round,
                                  st.message());
                        }
                      });
}

void GroupAgent::RefuseOdd(Clock::MonoTime now) {
  for (const MemberRecord& m : freshness_.FreshMembers(now)) {
    if (m.agent == self_.agent) continue;
    if (auto diff = ConfigDifference(m, self_)) {
      if (refused_.insert(m.agent).second) {
        LogWarn("refusing member {} ({}): {}", m.agent, m.instance, *diff);
        Write([this, agent = m.agent, why = *diff] { return group_.Refuse(agent, why); },
              "refusing " + m.instance);
      }
    }
  }
}

void GroupAgent::Retain() {
  // Commits while it runs ask for one more run after it.
  retention_wanted_->store(true);
  if (retention_running_->exchange(true)) return;
  store_work_.Post([this, wanted = retention_wanted_, running = retention_running_] {
    do {
      while (wanted->exchange(false)) {
        auto gc = CollectGroupGarbage(c_.store, c_.clock, cfg_.job, cfg_.keep,
                                      std::chrono::hours(1));
        if (!gc.ok()) LogWarn("retention failed: {}", gc.status().message());
        // The logs of old rounds go with them (logs_keep, docs/design.md §13).
        auto logs = PruneLogs(c_.store, cfg_.job, cfg_.logs_keep);
        if (!logs.ok()) LogWarn("log retention failed: {}", logs.status().message());
      }
      running->store(false);
    } while (wanted->load() && !running->exchange(true));
  });
}

void GroupAgent::Coordinate(Clock::MonoTime now, const std::vector<PartRecord>* parts,
                            std::optional<GroupCommit> newest, const GroupView& view) {
  RefuseOdd(now);
  // A member of the round that went quiet ends it.
  if (state_ == State::kInRound) {
    for (const PlanMember& m : plan_->members) {
      if (m.agent == self_.agent || freshness_.Fresh(m.agent, now)) continue;
      LogWarn("member {} ({}) of round {} is gone; ending the round", m.agent, m.instance,
              plan_->round);
      EndRound(RoundEnd{"stale", c_.instance, m.instance + " is gone"});
      return;
    }
  }
  // A group snapshot once every rank's part of one step is stored.
  if (parts == nullptr) return;
  std::optional<int64_t> committed_step;
  if (newest) committed_step = newest->step;
  if (auto complete = CompleteGroup(*parts, cfg_.nodes, committed_step); complete && !commit_busy_) {
    CommitGroup(*complete, newest);
    // The answer and completion are judged on the next look, which lists it.
    return;
  }
  // A request for a checkpoint is answered by a group snapshot of this round
  // that a trainer saved after the request and that is not older than any
  // rank's step when it was asked (AnswersRequest).
  if (state_ == State::kEnding && newest && newest->round == plan_->round && view.asked &&
      view.asked->ok() && AnswersRequest(**view.asked, cfg_.nodes, newest->step) && !final_) {
    NameAnswer(*newest);
  }
  CompleteIfDone(newest, view);
}

void GroupAgent::CommitGroup(const std::vector<PartRecord>& complete,
                             const std::optional<GroupCommit>& newest) {
  {
    GroupCommit g;
    // Above every key listed, readable or not (a damaged record at the top
    // must not make every later commit fail its precondition).
    g.seq = std::max(next_group_seq_, newest ? newest->seq + 1 : 1);
    g.round = plan_->round;
    g.nodes = cfg_.nodes;
    g.step = complete.front().step;
    g.generation = generation_;
    g.created = FormatUtc(c_.clock.Now(), true);
    g.parts = complete;
    commit_busy_ = true;
    calls_.Post<Status>(
        [this, g] {
          // The lease is renewed first: a coordinator that lost it commits nothing.
          if (Status st = lease_.Renew(); !st.ok()) {
            return Status(st.code(), "not committing the group snapshot: " + std::string(st.message()));
          }
          return group_.CommitGroup(g);
        },
        [this, g](Status& st) {
          commit_busy_ = false;
          if (st.ok()) {
            LogInfo("committed group snapshot {}: step {}, {} nodes, {} bytes ({} stored)",
                    SeqName(g.seq), g.step, g.nodes, g.Bytes(), g.Stored());
            Event("snapshot", {{"seq", g.seq}, {"step", g.step}, {"nodes", g.nodes}});
            Retain();
            return;
          }
          LogWarn("committing group snapshot {} failed: {}", SeqName(g.seq), st.message());
          // Taken meanwhile: the next look lists the keys again.
          if (st.Is(StatusCode::kPreconditionFailed)) next_group_seq_ = g.seq + 1;
        });
  }
}

void GroupAgent::NameAnswer(const GroupCommit& answer) {
  calls_.Post<Status>(
      [this, round = plan_->round, seq = answer.seq, step = answer.step] {
        return group_.WriteFinal(round, seq, step);
      },
      [round = plan_->round, seq = answer.seq, step = answer.step](Status& st) {
        if (!st.ok()) {
          Noted(st, "naming the answer to round " + std::to_string(round) + "'s request");
          return;
        }
        LogInfo("group snapshot {} (step {}) answers round {}'s request", SeqName(seq), step,
                round);
      });
}

void GroupAgent::CompleteIfDone(const std::optional<GroupCommit>& newest, const GroupView& view) {
  // Completion: every rank's trainer exited 0 and its last part is in a group snapshot.
  if (!view.done || !view.done->ok() || static_cast<int>((*view.done)->size()) < cfg_.nodes) {
    return;
  }
  for (const auto& [rank, step] : **view.done) {
    if (step && (!newest || newest->step < *step)) return;  // not yet committed
  }
  if (completing_) return;
  completing_ = true;
  const std::optional<uint64_t> seq = newest ? std::optional<uint64_t>(newest->seq) : std::nullopt;
  const std::optional<int64_t> step = newest ? std::optional<int64_t>(newest->step) : std::nullopt;
  const uint64_t round = plan_->round;
  calls_.Post<Status>(
      [this, seq, step, round] {
        WriteCompleteMarker(c_.store, c_.clock, events_, cfg_.job, c_.instance, seq, step);
        return group_.EndRound(round, RoundEnd{"complete", c_.instance, ""});
      },
      [this](Status& st) {
        completing_ = false;
        Noted(st, "ending the round");
        JobComplete();
      });
}

void GroupAgent::FailJob(const std::string& why, const std::optional<RoundPlan>& plan) {
  LogError("job {} failed: {}", cfg_.job, why);
  Write([this, record = FailureRecord{why, FormatUtc(c_.clock.Now(), true),
                                       plan ? plan->round : 0, SettingsDigest(cfg_)}] {
    return group_.MarkFailed(record);
  },
        "recording the failure");
  Event("failed", {{"why", why}});
  Exit(kExitFailure);
}

void GroupAgent::GuardResume(const RoundPlan& plan, const std::vector<RoundEnd>& ends,
                             bool crash, const GroupView& view) {
  std::string why;
  for (const RoundEnd& e : ends) {
    why += (why.empty() ? "" : "; ") + e.reason + " on " + e.by +
           (e.detail.empty() ? "" : " (" + e.detail + ")");
  }
  // Rounds only grow: a group snapshot committed in this round is the newest.
  bool committed = false;
  if (crash && plan.resume_seq && view.groups) {
    const std::optional<GroupCommit> newest = NewestGroup(*view.groups);
    committed = newest && newest->round == plan.round;
  }
  const std::optional<uint64_t> suspect = resume_guard_.RoundEnded(
      plan.resume_seq, crash, committed, "round " + std::to_string(plan.round) + ": " + why);
  if (!suspect) return;
  // Each member counts the same ends; the coordinator writes the mark.
  crash_rounds_ = 0;  // the fallback's rounds are counted afresh, as one node's restarts are
  LogError("the trainers failed {} round(s) in a row resumed from group snapshot {} without a "
           "newer one: it is suspect, and the next round resumes from the newest group snapshot "
           "that is not (spotguard unsuspect {} clears the mark)",
           resume_guard_.ends().size(), SeqName(*suspect), *suspect);
  if (!coordinating_) return;
  nlohmann::ordered_json record = {{"seq", *suspect},
                                   {"time", FormatUtc(c_.clock.Now(), true)},
                                   {"instance", c_.instance},
                                   {"rounds", resume_guard_.ends()}};
  suspect_posted_ = true;
  Write([this, seq = *suspect, record] { return MarkGroupSuspect(c_.store, cfg_.job, seq, record); },
        "marking group snapshot " + SeqName(*suspect) + " suspect");
  Event("suspect", record);
}

}  // namespace sg::group_detail
