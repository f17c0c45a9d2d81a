// The group executor performs the group policy's actions
// (agent/group/group_policy.h; docs/design.md §14): each store write is posted
// off the loop (LoopCalls), and the results the policy asked for go back to it.
#include <algorithm>

#include "agent/group/group_agent_impl.h"
#include "agent/logs/log_store.h"
#include "agent/repo/group_retention.h"
#include "agent/repo/repository.h"
#include "agent/repo/group_suspect.h"
#include "agent/run/job_end.h"
#include "common/log.h"

namespace sg::group_detail {

namespace a = group_action;

GroupFacts GroupAgent::Facts() const {
  GroupFacts f;
  switch (phase()) {
    case JobPhase::kLease: f.phase = GroupFacts::Phase::kWaiting; break;
    case JobPhase::kTraining: f.phase = GroupFacts::Phase::kInRound; break;
    case JobPhase::kFinalSnapshot: f.phase = GroupFacts::Phase::kEnding; break;
    default: f.phase = GroupFacts::Phase::kOther; break;
  }
  f.plan = plan_;
  f.coordinating = coordinating_;
  f.generation = generation_;
  f.answered = node_.member_round() && node_.member_round()->answered;
  return f;
}

void GroupAgent::Perform(GroupActions actions) {
  for (const GroupAction& action : actions) {
    if (exit_code_) return;  // an exit is the last action
    Do(action);
  }
}

void GroupAgent::Do(const GroupAction& action) {
  if (const auto* log = std::get_if<a::Log>(&action)) {
    switch (log->level) {
      case a::Log::Level::kInfo: LogInfo("{}", log->message); break;
      case a::Log::Level::kWarn: LogWarn("{}", log->message); break;
      case a::Log::Level::kError: LogError("{}", log->message); break;
    }
  } else if (const auto* exit = std::get_if<a::Exit>(&action)) {
    Exit(exit->code);
  } else if (const auto* event = std::get_if<a::Event>(&action)) {
    Event(event->kind, event->details);
  } else if (std::holds_alternative<a::JobComplete>(action)) {
    JobComplete();
  } else if (std::holds_alternative<a::Retain>(action)) {
    Retain();
  } else if (const auto* join = std::get_if<a::Join>(&action)) {
    Join(join->plan, join->group);
  } else if (const auto* ask = std::get_if<a::AskForCheckpoint>(&action)) {
    PerformNode(node_.OnGroupRequest(Now(), ask->deadline, ask->warned));
  } else if (const auto* leave = std::get_if<a::Leave>(&action)) {
    PerformNode(node_.OnLeave(Now(), leave->why));
  } else if (const auto* read = std::get_if<a::RoundRead>(&action)) {
    if (read->group_step && (!observed_step_ || *read->group_step > *observed_step_)) {
      metrics_.Observe("snapshot", {{"step", *read->group_step}}, c_.clock.Now());
      observed_step_ = read->group_step;
    }
    PerformNode(node_.OnRoundRead(Now(), *read));
  } else {
    Post(action);
  }
}

void GroupAgent::Post(const GroupAction& action) {
  const std::string utc = FormatUtc(c_.clock.Now(), true);
  if (const auto* clear = std::get_if<a::ClearFailure>(&action)) {
    calls_.Post<Status>([this] { return group_.ClearFailure(); },
                        [this, failure = clear->failure](Status& st) {
                          Perform(policy_->OnFailureCleared(failure, st));
                        });
  } else if (const auto* refuse = std::get_if<a::Refuse>(&action)) {
    Write([this, r = *refuse] { return group_.Refuse(r.agent, r.why); },
          "refusing " + refuse->instance);
  } else if (const auto* plan = std::get_if<a::WritePlan>(&action)) {
    calls_.Post<Status>([this, p = plan->plan] { return group_.WritePlan(p); },
                        [p = plan->plan](Status& st) {
                          if (st.ok()) {
                            LogInfo("round {} planned: {} nodes, resuming {}", p.round, p.nodes,
                                    p.resume_seq ? "group snapshot " + SeqName(*p.resume_seq)
                                                 : "fresh");
                          } else if (!st.Is(StatusCode::kPreconditionFailed)) {
                            LogWarn("writing the plan of round {} failed: {}", p.round,
                                    st.message());
                          }
                        });
  } else if (const auto* end = std::get_if<a::EndRound>(&action)) {
    Write([this, e = *end] { return group_.EndRound(e.round, e.end); }, "ending the round");
  } else if (const auto* commit = std::get_if<a::Commit>(&action)) {
    GroupCommit g = commit->group;
    g.created = utc;
    calls_.Post<Status>(
        [this, g] {
          // The lease is renewed first: a coordinator that lost it commits nothing.
          if (Status st = lease_.Renew(); !st.ok()) {
            return Status(st.code(),
                          "not committing the group snapshot: " + std::string(st.message()));
          }
          return group_.CommitGroup(g);
        },
        [this, g](Status& st) { Perform(policy_->OnCommitted(g, st)); });
  } else if (const auto* answer = std::get_if<a::NameAnswer>(&action)) {
    calls_.Post<Status>([this, x = *answer] { return group_.WriteFinal(x.round, x.seq, x.step); },
                        [x = *answer](Status& st) {
                          if (!st.ok()) {
                            Noted(st, "naming the answer to round " + std::to_string(x.round) +
                                          "'s request");
                            return;
                          }
                          LogInfo("group snapshot {} (step {}) answers round {}'s request",
                                  SeqName(x.seq), x.step, x.round);
                        });
  } else if (const auto* complete = std::get_if<a::Complete>(&action)) {
    calls_.Post<Status>(
        [this, x = *complete] {
          WriteCompleteMarker(c_.store, c_.clock, events_, cfg_.job, c_.instance, x.seq, x.step);
          return group_.EndRound(x.round, RoundEnd{"complete", c_.instance, ""});
        },
        [this](Status& st) { Perform(policy_->OnCompleted(st)); });
  } else if (const auto* failed = std::get_if<a::MarkFailed>(&action)) {
    FailureRecord record = failed->failure;
    record.time = utc;
    Write([this, record] { return group_.MarkFailed(record); }, "recording the failure");
  } else if (const auto* suspect = std::get_if<a::MarkSuspect>(&action)) {
    nlohmann::ordered_json record = {{"seq", suspect->seq}, {"time", utc}};
    for (const auto& [k, v] : suspect->record.items()) record[k] = v;
    Write([this, seq = suspect->seq, record] {
      return MarkGroupSuspect(c_.store, cfg_.job, seq, record);
    },
          "marking group snapshot " + SeqName(suspect->seq) + " suspect");
  }
}

void GroupAgent::Retain() {
  // Commits while it runs ask for one more run after it.
  retention_wanted_->store(true);
  if (retention_running_->exchange(true)) return;
  store_work_.Post([this, wanted = retention_wanted_, running = retention_running_] {
    do {
      while (wanted->exchange(false)) {
        auto gc = Repository::Open(c_.store, cfg_.job)
                      .PruneGroup(c_.clock, GcOptions{.keep = cfg_.keep});
        if (!gc.ok()) LogWarn("retention failed: {}", gc.status().message());
        // The logs of old rounds go with them (logs_keep, docs/design.md §13).
        auto logs = PruneLogs(c_.store, cfg_.job, cfg_.logs_keep);
        if (!logs.ok()) LogWarn("log retention failed: {}", logs.status().message());
      }
      running->store(false);
    } while (wanted->load() && !running->exchange(true));
  });
}

}  // namespace sg::group_detail
