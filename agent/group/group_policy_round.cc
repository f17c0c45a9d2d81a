// The round protocol's decisions within a round (agent/group/group_policy.h;
// docs/design.md §14): how the round ends for this member, and the
// coordinator's part: a member gone, the group commit, the answer to a
// request and completion.
#include <algorithm>

#include "agent/group/group_policy.h"
#include "agent/repo/store_names.h"
#include "common/log.h"

namespace sg {

namespace a = group_action;

namespace {

// The other member whose notice is among `ends` ("" for none): a warning the
// node's checkpoint cadence counts, since spot interruptions come together.
std::string WarnedMember(const std::vector<RoundEnd>& ends, const std::string& self) {
  for (const RoundEnd& e : ends) {
    if (e.reason == "notice" && e.by != self) return e.by;
  }
  return "";
}

}  // namespace

void GroupPolicy::InRound(Clock::MonoTime now, const GroupView& view, const GroupFacts& given) {
  // The phase as this look's actions leave it: asked for a checkpoint, the
  // node is ending the round, and a member that left with a notice is no
  // member gone stale.
  GroupFacts facts = given;
  const auto& ends = *view.ends;
  const RoundOutcome outcome = ends.ok() ? OutcomeOfEnds(*ends) : RoundOutcome::kRunning;
  if (outcome == RoundOutcome::kComplete) {
    out_.push_back(a::JobComplete{});
    exited_ = true;
    return;
  }
  const uint64_t round = facts.plan->round;
  if (outcome == RoundOutcome::kCheckpointFirst && facts.phase == GroupFacts::Phase::kInRound) {
    Say(a::Log::Level::kInfo, Format("round {} ends: {} on {}; asking the trainer for a checkpoint",
                                     round, ends->front().reason, ends->front().by));
    out_.push_back(a::AskForCheckpoint{now + std::min(kGroupEndBudget, o_.stop_timeout),
                                       WarnedMember(*ends, o_.instance)});
    facts.phase = GroupFacts::Phase::kEnding;
    facts.answered = false;
  } else if (outcome == RoundOutcome::kStopNow) {
    const RoundEnd& first = ends->front();
    out_.push_back(a::Leave{"round " + std::to_string(round) + " ended: " + first.reason + " on " +
                            first.by + (first.detail.empty() ? "" : " (" + first.detail + ")")});
    return;
  }
  a::RoundRead read;
  const auto& parts = *view.parts;
  if (parts.ok()) read.parts = *parts;
  if (view.flushes && view.flushes->ok()) read.flushes = **view.flushes;
  const std::optional<GroupCommit> newest = NewestGroup(*view.groups);
  if (newest) read.group_step = newest->step;
  read.answered = view.final && view.final->ok() && **view.final;
  out_.push_back(std::move(read));
  // The coordinator decides on what this look read (no second listing).
  if (view.coordinating && facts.coordinating) {
    Coordinate(now, parts.ok() ? &*parts : nullptr, newest, view, facts);
  }
}

void GroupPolicy::Coordinate(Clock::MonoTime now, const std::vector<PartRecord>* parts,
                             const std::optional<GroupCommit>& newest, const GroupView& view,
                             const GroupFacts& facts) {
  RefuseOdd(now);
  const RoundPlan& plan = *facts.plan;
  // A member of the round that went quiet ends it.
  if (facts.phase == GroupFacts::Phase::kInRound) {
    for (const PlanMember& m : plan.members) {
      if (m.agent == self_.agent || freshness_.Fresh(m.agent, now)) continue;
      Say(a::Log::Level::kWarn, Format("member {} ({}) of round {} is gone; ending the round",
                                       m.agent, m.instance, plan.round));
      out_.push_back(a::EndRound{plan.round, RoundEnd{"stale", o_.instance, m.instance + " is gone"}});
      return;
    }
  }
  // A group snapshot once every rank's part of one step is stored.
  if (parts == nullptr) return;
  std::optional<int64_t> committed_step;
  if (newest) committed_step = newest->step;
  if (auto complete = CompleteGroup(*parts, o_.nodes, committed_step); complete) {
    if (committing_) return;
    GroupCommit g;
    // Above every key listed, readable or not (a damaged record at the top
    // must not make every later commit fail its precondition).
    g.seq = std::max(next_group_seq_, newest ? newest->seq + 1 : 1);
    g.round = plan.round;
    g.nodes = o_.nodes;
    g.step = complete->front().step;
    g.generation = facts.generation;
    g.parts = *complete;
    committing_ = true;
    out_.push_back(a::Commit{g});
    // The answer and completion are judged on the next look, which lists it.
    return;
  }
  // A request for a checkpoint is answered by a group snapshot of this round
  // that a trainer saved after the request and that is not older than any
  // rank's step when it was asked (AnswersRequest).
  if (facts.phase == GroupFacts::Phase::kEnding && !facts.answered && newest &&
      newest->round == plan.round && view.asked && view.asked->ok() &&
      AnswersRequest(**view.asked, o_.nodes, newest->step)) {
    out_.push_back(a::NameAnswer{plan.round, newest->seq, newest->step});
  }
  CompleteIfDone(newest, view, facts);
}

void GroupPolicy::CompleteIfDone(const std::optional<GroupCommit>& newest, const GroupView& view,
                                 const GroupFacts& facts) {
  // Completion: every rank's trainer exited 0 and its last part is in a group snapshot.
  if (completing_ || !view.done || !view.done->ok() ||
      static_cast<int>((*view.done)->size()) < o_.nodes) {
    return;
  }
  for (const auto& [rank, step] : **view.done) {
    if (step && (!newest || newest->step < *step)) return;  // not yet committed
  }
  completing_ = true;
  out_.push_back(a::Complete{facts.plan->round,
                             newest ? std::optional<uint64_t>(newest->seq) : std::nullopt,
                             newest ? std::optional<int64_t>(newest->step) : std::nullopt});
}

GroupActions GroupPolicy::OnCommitted(const GroupCommit& g, const Status& st) {
  committing_ = false;
  if (st.ok()) {
    return {a::Log{a::Log::Level::kInfo,
                   Format("committed group snapshot {}: step {}, {} nodes, {} bytes ({} stored)",
                          SeqName(g.seq), g.step, g.nodes, g.Bytes(), g.Stored())},
            a::Event{"snapshot", {{"seq", g.seq}, {"step", g.step}, {"nodes", g.nodes}}},
            a::Retain{}};
  }
  // Taken meanwhile: the next look lists the keys again.
  if (st.Is(StatusCode::kPreconditionFailed)) next_group_seq_ = g.seq + 1;
  return {a::Log{a::Log::Level::kWarn, Format("committing group snapshot {} failed: {}",
                                              SeqName(g.seq), st.message())}};
}

GroupActions GroupPolicy::OnCompleted(const Status& st) {
  completing_ = false;
  exited_ = true;
  GroupActions out;
  if (!st.ok()) {
    out.push_back(a::Log{a::Log::Level::kWarn, "ending the round failed: " + std::string(st.message())});
  }
  out.push_back(a::JobComplete{});
  return out;
}

}  // namespace sg
