#include "agent/ledger/goodput.h"

#include <algorithm>
#include <limits>

namespace sg {
namespace {

constexpr LedgerMs kNever = std::numeric_limits<LedgerMs>::max();

std::vector<LedgerCommit> JobCommits(const Ledger& ledger) {
  std::vector<LedgerCommit> all;
  for (const LedgerAttempt& a : ledger.attempts) all.insert(all.end(), a.commits.begin(), a.commits.end());
  std::sort(all.begin(), all.end(),
            [](const LedgerCommit& x, const LedgerCommit& y) { return x.time < y.time; });
  return all;
}

// The first of `times` at or after `from`.
std::optional<LedgerMs> FirstFrom(const std::vector<LedgerMs>& times, LedgerMs from) {
  for (LedgerMs t : times) {
    if (t >= from) return t;
  }
  return std::nullopt;
}

// Cuts one attempt's span into causes, from `cur` (its begin) to its end.
class Cutter {
 public:
  Cutter(AttemptGoodput& g) : g_(g), cur_(g.begin) {}
  // The time up to `to` (kept within the span, never before the last cut) goes to `cause`.
  void To(Cause cause, std::optional<LedgerMs> to) {
    const LedgerMs t = std::clamp(to.value_or(cur_), cur_, g_.end);
    if (t > cur_) {
      g_.segments.push_back({cause, cur_, t});
      g_.ms[static_cast<size_t>(cause)] += t - cur_;
    }
    cur_ = t;
  }
  LedgerMs now() const { return cur_; }

 private:
  AttemptGoodput& g_;
  LedgerMs cur_;
};

// The end of the trainer's useful run: the first request, notice, own exit,
// stop or agent exit after it started.
LedgerMs TrainingEnd(const LedgerAttempt& a, LedgerMs started, LedgerMs end) {
  LedgerMs te = end;
  if (auto r = FirstFrom(a.requests, started)) te = std::min(te, *r);
  for (const std::optional<LedgerMs>& t : {a.notice, a.trainer_exit, a.trainer_stop, a.exit}) {
    if (t && *t >= started) te = std::min(te, *t);
  }
  return te;
}

// Work is kept up to the newest checkpoint committed while the attempt
// trained and before the node's next attempt began (which resumed from it).
LedgerMs KeptUntil(const LedgerAttempt& a, const std::vector<LedgerCommit>& commits,
                   LedgerMs started, LedgerMs te, std::optional<LedgerMs> next_start) {
  if (!next_start && a.exit_reason == "complete") return te;
  LedgerMs kept = started;
  for (const LedgerCommit& c : commits) {
    if (c.time >= started && c.time <= next_start.value_or(kNever)) {
      kept = std::max(kept, c.checkpoint_time);
    }
  }
  return kept;
}

// The run's end after the trainer's useful run ended at `te`: the wait for
// the answer to a request made by then, then the shutdown up to `end`.
void CutTail(Cutter& cut, const LedgerAttempt& a, LedgerMs started, LedgerMs te, LedgerMs end) {
  if (auto request = FirstFrom(a.requests, started); request && *request <= te) {
    std::optional<LedgerMs> answer;
    for (const LedgerAnswer& x : a.answers) {
      if (x.time >= *request) {
        answer = x.time;
        break;
      }
    }
    cut.To(Cause::kCheckpointAnswer, answer ? answer : a.trainer_stop);
  }
  cut.To(Cause::kShutdown, end);
}

void Cut(AttemptGoodput& g, const std::vector<LedgerCommit>& commits,
         std::optional<LedgerMs> next_start) {
  const LedgerAttempt& a = *g.attempt;
  Cutter cut(g);
  cut.To(Cause::kStartup, a.agent_start);
  cut.To(Cause::kWaiting, a.lease);
  cut.To(Cause::kStartup, a.restore_start);
  if (a.restore_start) cut.To(Cause::kRestore, a.restore_end);
  const LedgerMs started = FirstFrom(a.trainer_starts, cut.now()).value_or(g.end);
  cut.To(Cause::kStartup, started);
  const LedgerMs te = TrainingEnd(a, started, g.end);
  g.kept_until = std::clamp(KeptUntil(a, commits, started, te, next_start), started, te);
  cut.To(Cause::kProductive, g.kept_until);
  cut.To(Cause::kLostWork, te);
  CutTail(cut, a, started, te, g.end);
}

// A group member's attempt of several rounds: each round is cut as one run
// (joined, restored, trained, its trainer stopped at the round's end), and
// the time from a round's end to the next round's join is waiting. Work of a
// round is kept up to the newest commit before the next round restored.
void CutRounds(AttemptGoodput& g, const std::vector<LedgerCommit>& commits,
               std::optional<LedgerMs> next_start) {
  const LedgerAttempt& a = *g.attempt;
  Cutter cut(g);
  cut.To(Cause::kStartup, a.agent_start);
  for (size_t i = 0; i < a.rounds.size(); ++i) {
    const LedgerRound& r = a.rounds[i];
    const bool last = i + 1 == a.rounds.size();
    const LedgerMs round_end = last ? g.end : r.end.value_or(a.rounds[i + 1].join);
    cut.To(Cause::kWaiting, r.join);
    cut.To(Cause::kStartup, r.restore_start);
    if (r.restore_start) cut.To(Cause::kRestore, r.restore_end);
    if (!r.trainer_start) continue;  // the round ended first: waiting, at the next join
    const LedgerMs started = std::max(*r.trainer_start, cut.now());
    cut.To(Cause::kStartup, started);
    const LedgerMs te = TrainingEnd(a, started, round_end);
    const std::optional<LedgerMs> resumed =
        last ? next_start : a.rounds[i + 1].restore_start.value_or(a.rounds[i + 1].join);
    const LedgerMs kept =
        std::clamp(KeptUntil(a, commits, started, te, resumed), started, te);
    cut.To(Cause::kProductive, kept);
    cut.To(Cause::kLostWork, te);
    if (last) {
      g.kept_until = kept;
      CutTail(cut, a, started, te, g.end);
    } else {
      cut.To(Cause::kShutdown, round_end);  // the trainer stopping at the round's end
    }
  }
  cut.To(Cause::kShutdown, g.end);
}

void AddCheckpointCost(const LedgerAttempt& a, const std::vector<LedgerCommit>& commits,
                       CheckpointCost& cost) {
  for (LedgerMs request : a.requests) {
    for (const LedgerAnswer& x : a.answers) {
      if (x.time < request) continue;
      if (!x.answered) break;
      const double r2a = static_cast<double>(x.time - request) / 1000.0;
      ++cost.samples;
      cost.mean_request_to_answer += r2a;
      cost.max_request_to_answer = std::max(cost.max_request_to_answer, r2a);
      // The first commit after the answer, by the end of the attempt (a
      // group's is the coordinator's); none: the answer was not committed.
      for (const LedgerCommit& c : commits) {
        if (c.time >= x.time && c.time <= a.last) {
          const double a2c = static_cast<double>(c.time - x.time) / 1000.0;
          ++cost.commit_samples;
          cost.mean_answer_to_commit += a2c;
          cost.max_answer_to_commit = std::max(cost.max_answer_to_commit, a2c);
          break;
        }
      }
      break;
    }
  }
}

void Summarize(Goodput& g, const std::vector<LedgerCommit>& commits) {
  for (const LedgerCommit& c : commits) {
    if (c.step && (!g.newest_step || *c.step > *g.newest_step)) g.newest_step = c.step;
  }
  LedgerMs earliest = kNever;
  for (size_t i = 0; i < g.attempts.size(); ++i) {
    const AttemptGoodput& a = g.attempts[i];
    for (size_t i = 0; i < kCauseCount; ++i) g.total[i] += a.ms[i];
    g.instance_ms += a.end - a.begin;
    if (a.interrupted) ++g.interruptions;
    if (a.begin < earliest) {
      earliest = a.begin;
      g.first_step = a.resumed_step;
    }
    const size_t lost = static_cast<size_t>(Cause::kLostWork);
    if (!g.longest_loss || a.ms[lost] > g.attempts[*g.longest_loss].ms[lost]) g.longest_loss = i;
  }
  for (int64_t ms : g.total) g.node_ms += ms;
  const double productive_h =
      static_cast<double>(g.total[static_cast<size_t>(Cause::kProductive)]) / 3.6e6;
  if (productive_h > 0 && g.newest_step) {
    g.steps_per_productive_hour =
        static_cast<double>(*g.newest_step - g.first_step.value_or(0)) / productive_h;
  }
  const double instance_h = static_cast<double>(g.instance_ms) / 3.6e6;
  if (instance_h > 0) g.interruptions_per_instance_day = g.interruptions / (instance_h / 24.0);
  if (g.interruptions > 0) g.mtbf_hours = instance_h / g.interruptions;
  if (g.checkpoint.samples > 0) {
    g.checkpoint.mean_request_to_answer /= g.checkpoint.samples;
  }
  if (g.checkpoint.commit_samples > 0) {
    g.checkpoint.mean_answer_to_commit /= g.checkpoint.commit_samples;
  }
}

}  // namespace

std::string_view CauseName(Cause cause) {
  switch (cause) {
    case Cause::kProductive:
      return "productive";
    case Cause::kLostWork:
      return "lost_work";
    case Cause::kRestore:
      return "restore";
    case Cause::kStartup:
      return "startup";
    case Cause::kWaiting:
      return "waiting";
    case Cause::kCheckpointAnswer:
      return "checkpoint_answer";
    case Cause::kShutdown:
      return "shutdown";
  }
  return "?";
}

Goodput ComputeGoodput(const Ledger& ledger) {
  Goodput g;
  const std::vector<LedgerCommit> commits = JobCommits(ledger);
  const std::vector<LedgerAttempt>& all = ledger.attempts;
  g.attempts.reserve(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const LedgerAttempt& a = all[i];
    const LedgerAttempt* prev = i > 0 && all[i - 1].node == a.node ? &all[i - 1] : nullptr;
    const LedgerAttempt* next = i + 1 < all.size() && all[i + 1].node == a.node ? &all[i + 1] : nullptr;
    AttemptGoodput ag;
    ag.attempt = &a;
    // The launch counts when it is between the node's previous attempt and
    // this one's first event: an agent run again on the same instance (an
    // engine's retry) has the instance's old launch, and its gap is waiting.
    const bool launch_known = a.launch && *a.launch <= a.first &&
                              (prev == nullptr || *a.launch >= g.attempts.back().end);
    const LedgerMs launched = launch_known ? *a.launch : a.first;
    const LedgerMs prev_end = prev ? g.attempts.back().end : launched;
    ag.begin = std::max(launched, prev_end);
    ag.end = std::max(ag.begin, a.last);
    ag.interrupted = a.notice.has_value() || a.exit_reason == "notice";
    const LedgerMs restore_from = a.restore_start.value_or(a.first);
    for (const LedgerCommit& c : commits) {
      if (c.time < restore_from && c.step) ag.resumed_step = c.step;
    }
    if (launched > prev_end) {  // the gap before it: nothing ran on this node
      ag.segments.push_back({Cause::kWaiting, prev_end, launched});
      ag.ms[static_cast<size_t>(Cause::kWaiting)] += launched - prev_end;
    }
    std::optional<LedgerMs> next_start;
    if (next) next_start = next->restore_start.value_or(next->first);
    if (a.rounds.size() > 1) {
      CutRounds(ag, commits, next_start);
    } else {
      Cut(ag, commits, next_start);
    }
    AddCheckpointCost(a, commits, g.checkpoint);
    g.first = i == 0 ? ag.begin : std::min(g.first, ag.begin);
    g.last = std::max(g.last, ag.end);
    g.attempts.push_back(std::move(ag));
  }
  Summarize(g, commits);
  return g;
}

}  // namespace sg
