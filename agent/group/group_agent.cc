// The executor of the round protocol (docs/design.md §14): setup, the loop,
// this member's record, the lease and reading the round. Its decisions are
// agent/repo/group_protocol.h's pure functions. Store calls run on the loop
// except for part uploads, which run on a thread of their own.
#include "agent/group/group_agent.h"

#include "agent/group/group_agent_impl.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>

#include "agent/detect/capture.h"
#include "agent/run/attempt_record.h"
#include "agent/ledger/events.h"
#include "agent/config/exit_codes.h"
#include "agent/repo/group_protocol.h"
#include "agent/repo/group_store.h"
#include "agent/run/job_end.h"
#include "agent/run/job_ports_real.h"
#include "agent/run/job_start.h"
#include "agent/repo/lease.h"
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
#include "common/orphan_reaper.h"
#include "common/signal_names.h"

namespace sg::group_detail {

namespace {

std::string RandomHex(int bytes) {
  std::random_device rd;
  std::string out;
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < bytes; ++i) {
    const unsigned v = rd() & 0xff;
    out += kHex[v >> 4];
    out += kHex[v & 15];
  }
  return out;
}

// How peers reach this node: group.address, else the metadata service's
// local-ipv4, else the host's first non-loopback IPv4 address.
std::string OwnAddress(const Config& cfg, MetadataService* imds) {
  if (cfg.group.address) return *cfg.group.address;
  if (imds) {
    if (auto ip = imds->Get("meta-data/local-ipv4"); ip.ok() && !ip->empty()) return *ip;
  }
  ifaddrs* list = nullptr;
  std::string found = "127.0.0.1";
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
      char host[NI_MAXHOST];
      if (::getnameinfo(a->ifa_addr, sizeof(sockaddr_in), host, sizeof host, nullptr, 0,
                        NI_NUMERICHOST) != 0) {
        continue;
      }
      if (std::string(host).starts_with("127.")) continue;
      found = host;
      break;
    }
    ::freeifaddrs(list);
  }
  return found;
}

}  // namespace

Status GroupAgent::Setup() {
  if (!c_.ports.stop_requested) {
    SG_ASSIGN_OR_RETURN(signal_fd_, BlockStopSignals());
  }
  ClaimedDir claimed = ClaimCheckpointDir(cfg_);
  if (!claimed.status.ok()) {
    exit_code_ = claimed.exit_code;
    return claimed.status;
  }
  host_lock_ = std::move(claimed.lock);
  SG_RETURN_IF_ERROR(
      CheckWritableDir(cfg_.checkpoint_dir, "checkpoint_dir " + cfg_.checkpoint_dir));
  // A fresh disk has no checkpoint dir yet: made here, as one node's agent
  // makes it before its restore.
  SG_RETURN_IF_ERROR(MakeDirs(cfg_.checkpoint_dir));
  SG_ASSIGN_OR_RETURN(LoopParts parts, PrepareLoopParts(c_));
  staging_root_ = std::move(parts.staging_root);
  own_checkpoints_ = std::move(parts.own_checkpoints);
  checkpoints_ = parts.checkpoints;
  monitor_ = std::move(parts.monitor);
  GroupWatchOptions watch;
  watch.notice_file = notice_file_;
  watch.checkpoint_signal = cfg_.checkpoint_signal;
  watch.signal_target = signal_target_;
  watch.stop_signal = cfg_.stop_signal;
  watch.stop_grace = duration_cast<milliseconds>(std::min<Duration>(cfg_.stop_grace, kMaxLeaveGrace));
  watch.stop_timeout = duration_cast<milliseconds>(cfg_.stop_timeout);
  watch.poll_interval = cfg_.imds.poll_interval;
  watch.untimed_budget = kGroupEndBudget;
  watch.give_up_before = kGiveUpBefore;
  GroupWatch::ExitFn exit_now;
  if (watch_on_loop_) {
    // The backstop of a loop held past the deadline; on the loop itself it
    // can only find the loop late, and ends the agent as the loop would.
    exit_now = [this](int code) {
      exit_code_ = code;
      state_ = State::kDone;
    };
  }
  watch_ = std::make_unique<GroupWatch>(watch, c_.clock, monitor_.get(), signal_fd_.get(),
                                        trainer_slot_, std::move(exit_now));
  logs_.Open(c_.env);
  launcher_.set_output(logs_.TrainerSink());
  self_ = OwnRecord(cfg_, c_.instance, c_.instance + "-" + RandomHex(4),
                    OwnAddress(cfg_, c_.imds));
  LogInfo("member {} of job {} ({} nodes), reachable at {}", self_.agent, cfg_.job, cfg_.nodes,
          self_.address);
  return Status::Ok();
}

void GroupAgent::TakeNews(Clock::MonoTime now) {
  GroupWatch::News news = watch_->Take();
  // On its way out: the ledger's events wait until the trainer is stopped.
  if (news.stop_signal || !news.notices.empty()) defer_events_ = true;
  for (const InterruptionEvent& e : news.others) TakeRebalance(now, e);
  if (news.stop_signal || !news.notices.empty()) SayStopping();
  // The Auto Scaling hook waits for this node's CONTINUE, sent after the stop.
  if (!news.notices.empty()) lifecycle_due_ = true;
  if ((news.stop_signal || !news.notices.empty()) && state_ == State::kJoining) {
    // Leaving while the part is restored: the round cannot go on without
    // this node; its trainer never started. Out of the membership first (no
    // more beats either), so that the round's end never finds it planned
    // again; then `left`: the others stop at once, as nothing of this
    // node's can be saved.
    LogWarn("leaving round {} before its trainer started", plan_->round);
    noticed_ = true;
    Noted(group_.RemoveMember(self_.agent), "leaving the membership");
    Noted(group_.EndRound(plan_->round, RoundEnd{"left", c_.instance,
                                                 news.stop_signal ? "SIGTERM" : "notice"}),
          "ending the round");
    for (const InterruptionEvent& e : news.notices) Event("notice", e.ToJson());
    Exit(kExitInterrupted);
    return;
  }
  if (news.stop_signal) {
    if (state_ == State::kInRound) {
      Noted(group_.EndRound(plan_->round, RoundEnd{"stop", c_.instance, "SIGTERM"}),
            "ending the round");
      BeginEnding(now,
                  now + duration_cast<milliseconds>(cfg_.stop_timeout) - kGiveUpBefore,
                  true, watch_->asked_at());
    } else if (state_ != State::kEnding) {
      Exit(kExitInterrupted);
      return;
    } else {
      noticed_ = true;
    }
  }
  for (const InterruptionEvent& e : news.notices) {
    Event("notice", e.ToJson());
    if (state_ == State::kInRound) {
      LogWarn("interruption notice: ending round {} on every node", plan_->round);
      Noted(group_.EndRound(plan_->round, RoundEnd{"notice", c_.instance, e.ToJson().dump()}),
            "ending the round");
      // Until 10 s before the notice's deadline: then the trainer is stopped.
      const auto left = e.time ? duration_cast<milliseconds>(*e.time - c_.clock.Now()) -
                                     kGiveUpBefore
                               : kGroupEndBudget;
      BeginEnding(now, now + std::max(left, milliseconds(0)), true, watch_->asked_at());
    } else if (state_ == State::kEnding) {
      noticed_ = true;
    } else if (state_ != State::kDone) {
      LogWarn("interruption notice while not in a round: leaving the group");
      noticed_ = true;
      Noted(group_.RemoveMember(self_.agent), "leaving the membership");
      Exit(kExitInterrupted);
      return;
    }
  }
}

void GroupAgent::Beat(Clock::MonoTime now) {
  // A node on its way out is no member of the next round.
  if (noticed_ || now < next_beat_) return;
  next_beat_ = now + cfg_.group.heartbeat;
  ++self_.beat;
  if (Status st = group_.WriteMember(self_); !st.ok()) {
    LogWarn("writing this member's record failed (will retry): {}", st.message());
  }
}

void GroupAgent::KeepLease(Clock::MonoTime now) {
  // Whether to try is known once the members and the newest plan were read.
  if (now < next_lease_ || (!lease_.held() && !plan_read_)) return;
  next_lease_ = now + std::min<Duration>(cfg_.lease.heartbeat, cfg_.group.heartbeat);
  if (lease_.held()) {
    if (!lease_.RenewalDue()) return;
    Status st = lease_.Renew();
    if (st.reason() == "Fenced") {
      LogWarn("no longer the coordinator: {}", st.message());
    } else if (!st.ok()) {
      LogWarn("renewing the lease failed (will retry): {}", st.message());
    }
    return;
  }
  // Only a member that is not on its way out coordinates.
  if (noticed_ || state_ == State::kDone) return;
  // A newcomer leaves it to the last round's members while one is alive.
  if (state_ == State::kWaiting &&
      !MayCoordinate(self_, newest_plan_, freshness_.FreshMembers(now))) {
    return;
  }
  auto attempt = lease_.TryAcquire();
  if (attempt.ok() && attempt->outcome == LeaseKeeper::Outcome::kAcquired) {
    LogInfo("coordinating job {} (lease generation {})", cfg_.job, lease_.generation());
  }
}

void GroupAgent::Look(Clock::MonoTime now) {
  if (now < next_look_) return;
  next_look_ = now + std::clamp(duration_cast<milliseconds>(cfg_.group.heartbeat) / 4, kMinLook,
                                kMaxLook);
  if (auto members = group_.Members(); members.ok()) {
    freshness_.Observe(now, *members);
  } else {
    LogWarn("listing the members failed: {}", members.status().message());
    return;
  }
  if (state_ == State::kWaiting) {
    // The coordinator's settings are the group's: a member that differs is refused.
    if (auto refused = group_.Refusal(self_.agent); refused.ok() && *refused) {
      LogError("refused by the group's coordinator: {}", **refused);
      Exit(kExitUsage);
      return;
    }
    if (auto failed = group_.Failed(); failed.ok() && *failed && StopsOnFailure(**failed)) return;
    if (lease_.held()) RefuseOdd(now);
    auto plans = group_.Plans();
    if (!plans.ok()) {
      LogWarn("reading the newest plan failed: {}", plans.status().message());
      return;
    }
    newest_plan_ = plans->newest;
    next_round_ = plans->NextRound();
    plan_read_ = true;
    Waiting(now, plans->newest);
  } else if (state_ == State::kInRound || state_ == State::kEnding) {
    auto ends = group_.Ends(plan_->round);
    const RoundOutcome outcome = ends.ok() ? OutcomeOfEnds(*ends) : RoundOutcome::kRunning;
    if (outcome == RoundOutcome::kComplete) {
      JobComplete();
      return;
    }
    if (outcome == RoundOutcome::kCheckpointFirst && state_ == State::kInRound) {
      LogInfo("round {} ends: {} on {}; asking the trainer for a checkpoint", plan_->round,
              ends->front().reason, ends->front().by);
      BeginEnding(now, now + std::min<Duration>(kGroupEndBudget, cfg_.stop_timeout), false);
    } else if (outcome == RoundOutcome::kStopNow) {
      const RoundEnd& first = ends->front();
      LeaveRound("round " + std::to_string(plan_->round) + " ended: " + first.reason + " on " +
                 first.by + (first.detail.empty() ? "" : " (" + first.detail + ")"));
      return;
    }
    auto parts = group_.Parts(plan_->round);
    if (parts.ok()) round_parts_ = *parts;
    if (state_ == State::kInRound) {
      if (auto flushes = group_.Flushes(plan_->round); flushes.ok()) TakeFlushes(now, *flushes);
    }
    const std::optional<GroupCommit> newest = NewestGroup();
    if (newest) group_step_ = newest->step;
    // The coordinator decides on what this look read (no second listing).
    if (lease_.held()) Coordinate(now, parts.ok() ? &*parts : nullptr, newest);
    if (state_ == State::kEnding && !final_) {
      if (auto f = group_.Final(plan_->round); f.ok() && *f) final_ = true;
    }
  }
}

void GroupAgent::JobComplete() {
  LogInfo("job {} is complete", cfg_.job);
  // Every node releases its own instance (shutdown) or the group
  // (scale-to-zero, which is idempotent), as a single node does.
  PerformOnComplete({cfg_, c_.env, asg_, events_, c_.instance});
  Exit(kExitOk);
}

void GroupAgent::Exit(int code) {
  SayStopping();
  exit_code_ = code;
  if (watch_) watch_->SetExitCode(code);
  state_ = State::kDone;
}

}  // namespace sg::group_detail
