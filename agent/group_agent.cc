// The executor of the round protocol (docs/design.md §14). Its decisions are
// agent/group_protocol.h's pure functions; this file performs them against
// the store, the trainer and the metadata service, on one loop. Store calls
// run on the loop except for part uploads, which run on a thread of their own.
#include "agent/group_agent.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>

#include "agent/capture.h"
#include "agent/events.h"
#include "agent/exit_codes.h"
#include "agent/group_commands.h"
#include "agent/group_protocol.h"
#include "agent/group_store.h"
#include "agent/job_end.h"
#include "agent/job_ports_real.h"
#include "agent/job_start.h"
#include "agent/lease.h"
#include "agent/presets.h"
#include "agent/restorer.h"
#include "agent/snapshot_commands.h"
#include "agent/snapshot_writer.h"
#include "agent/store_layout.h"
#include "agent/supervisor.h"
#include "agent/trainer_record.h"
#include "common/autoscaling_client.h"
#include "common/files.h"
#include "common/log.h"
#include "common/signal_names.h"

namespace sg {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr auto kTick = milliseconds(100);
// The store is read for the round's news every quarter heartbeat, between
// these bounds (docs/multi-node.md, "Cost in S3 requests").
constexpr auto kMinLook = milliseconds(250);
constexpr auto kMaxLook = milliseconds(2'000);
// What a node waits for the group's commit after a notice elsewhere, when
// stop_timeout is longer: a spot notice gives two minutes.
constexpr auto kGroupEndBudget = milliseconds(100'000);

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

class GroupAgent {
 public:
  explicit GroupAgent(const AgentContext& c)
      : c_(c),
        cfg_(c.config),
        group_(c.store, cfg_.job),
        events_(c.store, c.clock, cfg_.job, c.instance),
        lease_(c.lease_store ? *c.lease_store : c.store, c.clock, cfg_.job, c.instance,
               LeaseOptions{cfg_.lease.heartbeat, cfg_.lease.timeout}),
        freshness_(duration_cast<milliseconds>(cfg_.group.timeout)),
        notice_file_(NoticeFilePath(cfg_)),
        launcher_(cfg_, c.env, notice_file_, TrainerRecordPath(cfg_.checkpoint_dir)),
        uploader_([this](const Checkpoint& ck,
                         const std::atomic<bool>* cancel) { return WritePart(ck, cancel); },
                  c.clock),
        autoscaling_(c.aws, c.clock) {}

  AgentResult Run();

 private:
  enum class State { kWaiting, kInRound, kEnding, kDone };

  Status Setup();
  bool StopRequested();
  void Beat(Clock::MonoTime now);
  void KeepLease(Clock::MonoTime now);
  void Look(Clock::MonoTime now);
  void Waiting(Clock::MonoTime now, const std::optional<RoundPlan>& plan);
  void Coordinate(Clock::MonoTime now);
  // The coordinator refuses fresh members whose settings differ from its own.
  void RefuseOdd(Clock::MonoTime now);
  void Join(const RoundPlan& plan);
  void InRound(Clock::MonoTime now);
  void BeginEnding(Clock::MonoTime now, Clock::MonoTime deadline, bool noticed);
  void Ending(Clock::MonoTime now);
  void LeaveRound(const std::string& why);
  // Starts the upload of the part ChooseUpload picks, if any.
  void UploadPart(Clock::MonoTime now);
  void TakeUploadResult();
  StatusOr<SnapshotResult> WritePart(const Checkpoint& checkpoint,
                                      const std::atomic<bool>* cancel);
  std::optional<GroupCommit> NewestGroup();
  void Exit(int code);

  const AgentContext& c_;
  const Config& cfg_;
  GroupStore group_;
  EventLog events_;
  LeaseKeeper lease_;
  MemberFreshness freshness_;
  const std::string notice_file_;
  ProcessTrainerLauncher launcher_;
  ThreadUploader uploader_;
  LazyAutoScaling autoscaling_;
  std::optional<HostLock> host_lock_;
  UniqueFd signal_fd_;
  std::unique_ptr<CheckpointSource> own_checkpoints_;
  CheckpointSource* checkpoints_ = nullptr;
  std::unique_ptr<InterruptionMonitor> monitor_;
  std::string staging_root_;

  MemberRecord self_;
  State state_ = State::kWaiting;
  std::optional<RoundPlan> plan_;  // the round this agent takes part in
  int rank_ = 0;
  std::unique_ptr<Trainer> trainer_;
  int attempt_ = 0;
  std::optional<int64_t> part_step_;       // of this node's newest stored part in the round
  std::optional<int64_t> uploading_step_;  // of the part being uploaded
  std::vector<int64_t> uploaded_;          // steps uploaded (or tried) in the round
  std::vector<PartRecord> round_parts_;    // every rank's parts of the round, as last read
  std::optional<int64_t> group_step_;      // of the newest group snapshot, as last read
  Clock::MonoTime next_periodic_{};        // the next periodic upload (upload_interval)
  bool asked_ = false;                     // a checkpoint was asked for and not answered
  std::optional<int64_t> answer_step_;     // the part that answers it
  bool final_ = false;                     // the round's request is answered (final.json)
  std::string stepless_warned_;           // a checkpoint without a step, said once
  bool trainer_done_ = false;            // exited 0; its last part is going up
  bool done_marked_ = false;
  // Ending a round on a notice
  bool noticed_ = false;  // this node got the notice (or SIGTERM): it exits then
  Clock::MonoTime ending_deadline_{};
  std::optional<int64_t> asked_after_;  // a part newer than this answers the request
  // The coordinator's view
  std::optional<uint64_t> skip_from_;  // a group snapshot a member could not restore
  std::set<std::string> refused_;      // members refused, by agent identity
  uint64_t counted_round_ = 0;         // the last ended round counted in crash_rounds_
  int crash_rounds_ = 0;               // rounds in a row ended by a crash
  Clock::MonoTime next_plan_at_{};
  Clock::MonoTime next_beat_{}, next_look_{}, next_lease_{}, next_poll_{};
  std::optional<int> exit_code_;
  AgentResult result_;
};

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
  SG_ASSIGN_OR_RETURN(staging_root_, PrepareStagingRoot(cfg_.checkpoint_dir, cfg_.job));
  (void)RemoveStaleCaptures(staging_root_);
  if (c_.ports.checkpoints) {
    checkpoints_ = c_.ports.checkpoints;
  } else {
    SG_ASSIGN_OR_RETURN(own_checkpoints_, WatchedCheckpoints::Start(cfg_, c_.clock));
    checkpoints_ = own_checkpoints_.get();
  }
  if (c_.imds) {
    InterruptionMonitor::Options options;
    options.poll_interval = cfg_.imds.poll_interval;
    monitor_ = std::make_unique<InterruptionMonitor>(*c_.imds, c_.clock, options);
  }
  self_ = OwnRecord(cfg_, c_.instance, c_.instance + "-" + RandomHex(4),
                    OwnAddress(cfg_, c_.imds));
  LogInfo("member {} of job {} ({} nodes), reachable at {}", self_.agent, cfg_.job, cfg_.nodes,
          self_.address);
  return Status::Ok();
}

bool GroupAgent::StopRequested() {
  if (c_.ports.stop_requested) return c_.ports.stop_requested();
  return StopSignalArrived(signal_fd_.get());
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
  if (now < next_lease_) return;
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
  auto attempt = lease_.TryAcquire();
  if (attempt.ok() && attempt->outcome == LeaseKeeper::Outcome::kAcquired) {
    LogInfo("coordinating job {} (lease generation {})", cfg_.job, lease_.generation());
  }
}

std::optional<GroupCommit> GroupAgent::NewestGroup() {
  auto groups = group_.Groups();
  if (!groups.ok()) {
    LogWarn("listing the group snapshots failed: {}", groups.status().message());
    return std::nullopt;
  }
  if (groups->empty()) return std::nullopt;
  return groups->back();
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
    if (auto failed = group_.Failed(); failed.ok() && *failed) {
      LogError("job {} failed: {}", cfg_.job, **failed);
      Exit(kExitFailure);
      return;
    }
    if (lease_.held()) RefuseOdd(now);
    auto plan = group_.NewestPlan();
    if (!plan.ok()) {
      LogWarn("reading the newest plan failed: {}", plan.status().message());
      return;
    }
    Waiting(now, *plan);
  } else if (state_ == State::kInRound || state_ == State::kEnding) {
    auto ends = group_.Ends(plan_->round);
    const RoundOutcome outcome = ends.ok() ? OutcomeOfEnds(*ends) : RoundOutcome::kRunning;
    if (outcome == RoundOutcome::kComplete) {
      LogInfo("job {} is complete", cfg_.job);
      Exit(kExitOk);
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
    if (auto parts = group_.Parts(plan_->round); parts.ok()) round_parts_ = std::move(*parts);
    if (auto newest = NewestGroup()) group_step_ = newest->step;
    if (lease_.held()) Coordinate(now);
    if (state_ == State::kEnding && !final_) {
      if (auto f = group_.Final(plan_->round); f.ok() && *f) final_ = true;
    }
  }
}

void GroupAgent::Waiting(Clock::MonoTime now, const std::optional<RoundPlan>& plan) {
  bool ended = false;
  if (plan) {
    auto ends = group_.Ends(plan->round);
    if (!ends.ok()) return;
    ended = !ends->empty();
    for (const RoundEnd& e : *ends) {
      if (e.reason == "complete") {
        LogInfo("job {} is complete", cfg_.job);
        Exit(kExitOk);
        return;
      }
      if (e.reason == "restore" && plan->resume_seq) skip_from_ = plan->resume_seq;
    }
    // Rounds in a row that a crash ended (each counted once); any other end resets it.
    if (ended && counted_round_ != plan->round) {
      counted_round_ = plan->round;
      const bool crash = std::any_of(ends->begin(), ends->end(),
                                     [](const RoundEnd& e) { return e.reason == "crash"; });
      crash_rounds_ = crash ? crash_rounds_ + 1 : 0;
    }
    if (!ended && plan->RankOf(self_.agent)) {
      Join(*plan);
      return;
    }
  }
  if (!lease_.held() || (plan && !ended) || now < next_plan_at_) return;
  if (crash_rounds_ > cfg_.restart.max) {
    const std::string why = Format("a trainer crashed in {} rounds in a row (restart.max {})",
                                   crash_rounds_, cfg_.restart.max);
    LogError("job {} failed: {}", cfg_.job, why);
    (void)group_.MarkFailed(why);
    (void)events_.Record("failed", {{"why", why}});
    Exit(kExitFailure);
    return;
  }
  // The group snapshot to resume from: the newest one every member could restore.
  auto groups = group_.Groups();
  if (!groups.ok()) return;
  const std::optional<GroupCommit> from = ResumePoint(*groups, skip_from_);
  if (from && from->nodes != cfg_.nodes) {
    LogError("group snapshot {} was made by {} nodes, and this job has nodes: {}; restore it "
             "with nodes: {}, or start the job under another name",
             SeqName(from->seq), from->nodes, cfg_.nodes, from->nodes);
    Exit(kExitUsage);
    return;
  }
  std::vector<MemberRecord> fresh = freshness_.FreshMembers(now);
  auto next = PlanNextRound(self_, fresh, cfg_.nodes, plan, plan ? plan->round + 1 : 1,
                            lease_.generation(), cfg_.group.port,
                            from ? std::optional<uint64_t>(from->seq) : std::nullopt,
                            from ? std::optional<int64_t>(from->step) : std::nullopt);
  if (!next) return;  // not enough members yet
  // Crash restarts wait as a single node's do (restart.backoff, max_backoff).
  if (const auto wait = CrashBackoff(crash_rounds_, duration_cast<milliseconds>(cfg_.restart.backoff),
                                     duration_cast<milliseconds>(cfg_.restart.max_backoff));
      wait.count() > 0 && next_plan_at_ == Clock::MonoTime{}) {
    next_plan_at_ = now + wait;
    return;
  }
  next_plan_at_ = {};
  Status st = group_.WritePlan(*next);
  if (st.ok()) {
    LogInfo("round {} planned: {} nodes, resuming {}", next->round, next->nodes,
            next->resume_seq ? "group snapshot " + SeqName(*next->resume_seq) : "fresh");
  } else if (!st.Is(StatusCode::kPreconditionFailed)) {
    LogWarn("writing the plan of round {} failed: {}", next->round, st.message());
  }
}

void GroupAgent::RefuseOdd(Clock::MonoTime now) {
  for (const MemberRecord& m : freshness_.FreshMembers(now)) {
    if (m.agent == self_.agent) continue;
    if (auto diff = ConfigDifference(m, self_)) {
      if (refused_.insert(m.agent).second) {
        LogWarn("refusing member {} ({}): {}", m.agent, m.instance, *diff);
        (void)group_.Refuse(m.agent, *diff);
      }
    }
  }
}

void GroupAgent::Join(const RoundPlan& plan) {
  rank_ = *plan.RankOf(self_.agent);
  plan_ = plan;
  part_step_.reset();
  uploading_step_.reset();
  uploaded_.clear();
  round_parts_.clear();
  asked_ = false;
  answer_step_.reset();
  next_periodic_ = c_.clock.Monotonic() + cfg_.upload_interval;
  trainer_done_ = done_marked_ = false;
  std::string resume;
  if (plan.resume_seq) {
    auto groups = group_.Groups();
    std::optional<PartRecord> part;
    if (groups.ok()) {
      for (const GroupCommit& g : *groups) {
        if (g.seq == *plan.resume_seq) part = g.parts.at(rank_);
      }
    }
    Status st = part ? Status::Ok()
                     : Status::NotFound("group snapshot " + SeqName(*plan.resume_seq) +
                                        " cannot be read");
    if (part) {
      RestoreOptions options;
      options.replace_foreign = true;  // the trainer's own files of a step the group did not commit
      Restorer restorer(c_.store, options);
      auto restored = restorer.Restore(PartJob(cfg_.job, rank_), cfg_.checkpoint_dir, part->seq);
      if (restored.ok()) {
        resume = restored->resume_path;
        part_step_ = part->step;
        LogInfo("restored rank {}'s part of group snapshot {} (step {})", rank_,
                SeqName(*plan.resume_seq), part->step);
      } else {
        st = restored.status();
      }
    }
    if (!st.ok()) {
      LogError("restoring rank {}'s part failed: {}", rank_, st.message());
      (void)group_.EndRound(plan.round, RoundEnd{"restore", c_.instance, st.message()});
      LeaveRound("the restore failed");
      return;
    }
  }
  GroupPlacement placement;
  placement.round = plan.round;
  placement.rank = rank_;
  placement.port = plan.port;
  for (const PlanMember& m : plan.members) placement.addresses.push_back(m.address);
  auto trainer = launcher_.Start(TrainerLaunch{resume, ++attempt_, placement});
  if (!trainer.ok()) {
    LogError("starting the trainer failed: {}", trainer.status().message());
    (void)group_.EndRound(plan.round, RoundEnd{"crash", c_.instance, trainer.status().message()});
    LeaveRound("the trainer did not start");
    return;
  }
  trainer_ = std::move(*trainer);
  state_ = State::kInRound;
  (void)c_.notifier.Notify("STATUS=training: round " + std::to_string(plan.round) + ", rank " +
                           std::to_string(rank_));
  LogInfo("round {}: rank {} of {}, master {}:{}", plan.round, rank_, plan.nodes,
          placement.addresses.front(), plan.port);
}

void GroupAgent::Coordinate(Clock::MonoTime now) {
  RefuseOdd(now);
  // A member of the round that went quiet ends it.
  if (state_ == State::kInRound) {
    for (const PlanMember& m : plan_->members) {
      if (m.agent == self_.agent || freshness_.Fresh(m.agent, now)) continue;
      LogWarn("member {} ({}) of round {} is gone; ending the round", m.agent, m.instance,
              plan_->round);
      (void)group_.EndRound(plan_->round, RoundEnd{"stale", c_.instance, m.instance + " is gone"});
      return;
    }
  }
  // A group snapshot once every rank's part of one step is stored.
  std::optional<GroupCommit> newest = NewestGroup();
  auto parts = group_.Parts(plan_->round);
  if (!parts.ok()) return;
  std::optional<int64_t> committed_step;
  if (newest) committed_step = newest->step;
  if (auto complete = CompleteGroup(*parts, cfg_.nodes, committed_step)) {
    GroupCommit g;
    g.seq = newest ? newest->seq + 1 : 1;
    g.round = plan_->round;
    g.nodes = cfg_.nodes;
    g.step = complete->front().step;
    g.generation = lease_.generation();
    g.created = FormatUtc(c_.clock.Now(), true);
    g.parts = *complete;
    // The lease is renewed first: a coordinator that lost it commits nothing.
    if (Status st = lease_.Renew(); !st.ok()) {
      LogWarn("not committing the group snapshot: {}", st.message());
      return;
    }
    if (Status st = group_.CommitGroup(g); st.ok()) {
      LogInfo("committed group snapshot {}: step {}, {} nodes, {} bytes ({} stored)",
              SeqName(g.seq), g.step, g.nodes, g.Bytes(), g.Stored());
      (void)events_.Record("snapshot", {{"seq", g.seq}, {"step", g.step}, {"nodes", g.nodes}});
      newest = g;
      // Retention: `keep` whole group snapshots (docs/multi-node.md).
      auto gc = CollectGroupGarbage(c_.store, c_.clock, cfg_.job, cfg_.keep, std::chrono::hours(1));
      if (!gc.ok()) LogWarn("retention failed: {}", gc.status().message());
    } else {
      LogWarn("committing group snapshot {} failed: {}", SeqName(g.seq), st.message());
    }
  }
  // A request for a checkpoint is answered by the first group snapshot newer
  // than every rank's step when it was asked.
  if (state_ == State::kEnding && newest) {
    auto asked = group_.Asked(plan_->round);
    if (asked.ok() && AnswersRequest(*asked, cfg_.nodes, newest->step)) {
      if (group_.WriteFinal(plan_->round, newest->seq, newest->step).ok()) {
        LogInfo("group snapshot {} (step {}) answers round {}'s request", SeqName(newest->seq),
                newest->step, plan_->round);
      }
    }
  }
  // Completion: every rank's trainer exited 0 and its last part is in a group snapshot.
  auto done = group_.Done(plan_->round);
  if (!done.ok() || static_cast<int>(done->size()) < cfg_.nodes) return;
  for (const auto& [rank, step] : *done) {
    if (step && (!newest || newest->step < *step)) return;  // not yet committed
  }
  WriteCompleteMarker(c_.store, c_.clock, events_, cfg_.job, c_.instance,
                      newest ? std::optional<uint64_t>(newest->seq) : std::nullopt,
                      newest ? std::optional<int64_t>(newest->step) : std::nullopt);
  (void)group_.EndRound(plan_->round, RoundEnd{"complete", c_.instance, ""});
  PerformOnComplete({cfg_, c_.env, autoscaling_, events_, c_.instance});
  LogInfo("job {} is complete", cfg_.job);
  Exit(kExitOk);
}

void GroupAgent::UploadPart(Clock::MonoTime now) {
  if (uploader_.busy()) return;
  auto all = checkpoints_->Complete();
  if (!all.ok()) return;
  UploadInput in;
  in.rank = rank_;
  std::map<int64_t, const Checkpoint*> by_step;
  for (const Checkpoint& c : *all) {
    if (!c.step) {
      if (&c == &all->front() && c.id != stepless_warned_) {
        LogWarn("checkpoint {} names no step: a group snapshot joins the parts of one step, so "
                "it is not uploaded (docs/multi-node.md)",
                c.id);
        stepless_warned_ = c.id;
      }
      continue;
    }
    by_step.emplace(*c.step, &c);
    in.local_steps.push_back(*c.step);
  }
  in.uploaded = uploaded_;
  in.parts = round_parts_;
  in.committed_step = group_step_;
  in.asked = asked_;
  in.asked_after = asked_after_;
  in.trainer_done = trainer_done_;
  in.periodic_due = state_ == State::kInRound && now >= next_periodic_;
  std::optional<UploadChoice> choice = ChooseUpload(in);
  if (!choice) return;
  static constexpr const char* kWhy[] = {"to complete a group snapshot", "answering the request",
                                         "the last", "periodic"};
  LogInfo("uploading rank {}'s part of step {} ({})", rank_, choice->step,
          kWhy[static_cast<int>(choice->reason)]);
  if (choice->reason == UploadReason::kPeriodic) next_periodic_ = now + cfg_.upload_interval;
  if (choice->reason == UploadReason::kAnswer) answer_step_ = choice->step;
  uploaded_.push_back(choice->step);
  uploading_step_ = choice->step;
  uploader_.Start(*by_step.at(choice->step));
}

StatusOr<SnapshotResult> GroupAgent::WritePart(const Checkpoint& checkpoint,
                                                const std::atomic<bool>* cancel) {
  SG_ASSIGN_OR_RETURN(CapturedCheckpoint capture,
                      CapturedCheckpoint::Capture(cfg_.checkpoint_dir, checkpoint, staging_root_));
  SnapshotRequest request;
  request.job = PartJob(cfg_.job, rank_);
  request.preset = std::string(PresetName(cfg_.preset));
  request.instance = c_.instance;
  request.cancel = cancel;
  SnapshotOptions options = SnapshotOptionsOf(cfg_);
  // Parts reference no frame of another part: group retention deletes a
  // part without looking for references into it (docs/design.md §14).
  options.reuse = false;
  SnapshotWriter writer(c_.store, c_.clock, options);
  return writer.Write(capture, request);
}

void GroupAgent::TakeUploadResult() {
  if (!uploader_.busy()) return;
  auto r = uploader_.Poll();
  if (!r) return;
  if (!r->result.ok()) {
    LogWarn("uploading rank {}'s part of step {} failed: {}", rank_, *uploading_step_,
            r->result.status().message());
    // A failed answer is tried again (with what is newest then); a failed
    // periodic part waits for the next period.
    if (answer_step_ == uploading_step_) answer_step_.reset();
    std::erase(uploaded_, *uploading_step_);
    return;
  }
  const SnapshotResult& s = *r->result;
  PartRecord part{rank_, *uploading_step_, s.seq, c_.instance, s.bytes, s.stored_bytes};
  if (Status st = group_.AnnouncePart(plan_->round, part); !st.ok()) {
    LogWarn("announcing rank {}'s part failed: {}", rank_, st.message());
    return;
  }
  if (!part_step_ || part.step > *part_step_) part_step_ = part.step;
  if (answer_step_ == part.step) asked_ = false;  // answered
  LogInfo("rank {}'s part of step {} is stored ({} bytes, {} stored) in {:.1f} s", rank_,
          part.step, s.bytes, s.stored_bytes, r->seconds);
}

void GroupAgent::InRound(Clock::MonoTime now) {
  if (trainer_ && !trainer_done_) {
    if (auto ended = trainer_->Poll()) {
      if (ended->success()) {
        LogInfo("rank {}'s trainer finished", rank_);
        trainer_done_ = true;
      } else {
        LogWarn("rank {}'s trainer {}; ending round {}", rank_, ended->ToString(), plan_->round);
        (void)group_.EndRound(plan_->round, RoundEnd{"crash", c_.instance, ended->ToString()});
        LeaveRound("the trainer failed");
        return;
      }
    }
  }
  TakeUploadResult();
  UploadPart(now);
  if (trainer_done_ && !done_marked_ && !uploader_.busy()) {
    // Its last checkpoint is stored (or it had none newer): this rank is done.
    auto all = checkpoints_->Complete();
    const bool newer_left = all.ok() && !all->empty() && all->front().step &&
                            (!part_step_ || *all->front().step > *part_step_);
    if (!newer_left && group_.MarkDone(plan_->round, rank_, part_step_).ok()) done_marked_ = true;
  }
}

void GroupAgent::BeginEnding(Clock::MonoTime now, Clock::MonoTime deadline, bool noticed) {
  state_ = State::kEnding;
  if (noticed && !noticed_) {
    // Leaving: the coordinator must not plan the next round with this node.
    (void)group_.RemoveMember(self_.agent);
  }
  noticed_ = noticed_ || noticed;
  ending_deadline_ = deadline;
  auto all = checkpoints_->Complete();
  asked_after_.reset();
  if (all.ok() && !all->empty()) asked_after_ = all->front().step;
  if (part_step_ && (!asked_after_ || *part_step_ > *asked_after_)) asked_after_ = part_step_;
  asked_ = true;
  answer_step_.reset();
  final_ = false;
  if (Status st = group_.MarkAsked(plan_->round, rank_, asked_after_); !st.ok()) {
    LogWarn("recording the request failed: {}", st.message());
  }
  checkpoints_->SetUrgent(true);
  nlohmann::ordered_json notice = {{"action", noticed ? "terminate" : "group"},
                                   {"round", plan_->round}};
  (void)WriteFileAtomic(notice_file_, notice.dump() + "\n");
  if (cfg_.checkpoint_signal && trainer_ && trainer_->running()) {
    (void)trainer_->SignalWorkers(*cfg_.checkpoint_signal);
  }
  (void)now;
}

void GroupAgent::Ending(Clock::MonoTime now) {
  if (trainer_ && !trainer_done_) {
    if (auto ended = trainer_->Poll()) trainer_done_ = ended->success();
  }
  TakeUploadResult();
  UploadPart(now);
  // Over once the coordinator has named the group snapshot that answers the
  // request (final_ is read every look), or at the deadline.
  const bool committed = final_;
  if (!committed && now < ending_deadline_) return;
  if (!committed) LogWarn("round {}: no group snapshot of the answer in time", plan_->round);
  if (trainer_) {
    if (auto stopped = trainer_->Stop(cfg_.stop_signal, duration_cast<milliseconds>(
                                                            std::min<Duration>(cfg_.stop_grace,
                                                                               std::chrono::seconds(10))));
        stopped.ok()) {
      LogInfo("the trainer stopped: {}", stopped->ToString());
    }
    trainer_.reset();
  }
  (void)::unlink(notice_file_.c_str());
  checkpoints_->SetUrgent(false);
  if (noticed_) {
    (void)events_.Record("stop", {{"round", plan_->round}, {"committed", committed}});
    Exit(committed ? kExitInterrupted : kExitNotCommitted);
    return;
  }
  LeaveRound("waiting for the next round");
}

void GroupAgent::LeaveRound(const std::string& why) {
  LogInfo("{}", why);
  if (trainer_) {
    if (trainer_->running()) {
      (void)trainer_->Stop(cfg_.stop_signal,
                           duration_cast<milliseconds>(
                               std::min<Duration>(cfg_.stop_grace, std::chrono::seconds(10))));
    }
    trainer_.reset();
  }
  if (uploader_.busy()) uploader_.Cancel();
  (void)uploader_.Wait(milliseconds(30'000));
  checkpoints_->SetUrgent(false);
  state_ = State::kWaiting;
  plan_.reset();
}

void GroupAgent::Exit(int code) {
  exit_code_ = code;
  state_ = State::kDone;
}

AgentResult GroupAgent::Run() {
  if (Status st = Setup(); !st.ok()) {
    LogError("{}", st.message());
    result_.exit_code = exit_code_.value_or(kExitFailure);
    return result_;
  }
  if (auto marker = c_.store.Head(CompleteKey(cfg_.job)); marker.ok()) {
    LogInfo("job {} is already complete; not starting it again", cfg_.job);
    (void)c_.notifier.Notify("READY=1");
    result_.exit_code = kExitOk;
    return result_;
  }
  (void)c_.notifier.Notify("READY=1");
  while (state_ != State::kDone) {
    if (c_.ports.idle) {
      c_.ports.idle(kTick);
    } else {
      pollfd fds[2] = {{signal_fd_.get(), POLLIN, 0}, {checkpoints_->fd(), POLLIN, 0}};
      ::poll(fds, 2, static_cast<int>(kTick.count()));
    }
    const auto now = c_.clock.Monotonic();
    checkpoints_->Poll();
    if (StopRequested()) {
      if (state_ == State::kInRound) {
        (void)group_.EndRound(plan_->round, RoundEnd{"stop", c_.instance, "SIGTERM"});
        BeginEnding(now, now + duration_cast<milliseconds>(cfg_.stop_timeout) - milliseconds(10'000),
                    true);
      } else if (state_ != State::kEnding) {
        Exit(kExitInterrupted);
        break;
      } else {
        noticed_ = true;
      }
    }
    Beat(now);
    KeepLease(now);
    if (monitor_ && now >= next_poll_) {
      next_poll_ = now + cfg_.imds.poll_interval;
      for (const InterruptionEvent& e : monitor_->PollOnce()) {
        if (!e.IsNotice()) continue;
        (void)events_.Record("notice", e.ToJson());
        if (state_ == State::kInRound) {
          LogWarn("interruption notice: ending round {} on every node", plan_->round);
          (void)group_.EndRound(plan_->round, RoundEnd{"notice", c_.instance, e.ToJson().dump()});
          // Until 10 s before the notice's deadline: then the trainer is stopped.
          const auto left = e.time ? duration_cast<milliseconds>(*e.time - c_.clock.Now()) -
                                         milliseconds(10'000)
                                   : kGroupEndBudget;
          BeginEnding(now, now + std::max(left, milliseconds(0)), true);
        } else if (state_ == State::kEnding) {
          noticed_ = true;
        } else {
          LogWarn("interruption notice while waiting for a round: leaving the group");
          Exit(kExitInterrupted);
        }
      }
    }
    if (state_ == State::kDone) break;
    Look(now);
    if (state_ == State::kInRound) InRound(now);
    if (state_ == State::kEnding) Ending(now);
  }
  if (trainer_) {
    (void)trainer_->Stop(cfg_.stop_signal, duration_cast<milliseconds>(cfg_.stop_grace));
    trainer_.reset();
  }
  if (uploader_.busy()) (void)uploader_.Wait(milliseconds(15'000));
  FinishStoppedTrainers();
  (void)group_.RemoveMember(self_.agent);
  if (lease_.held()) {
    if (Status st = lease_.Release(); !st.ok()) LogWarn("releasing the lease failed: {}", st.message());
  }
  result_.exit_code = exit_code_.value_or(kExitFailure);
  return result_;
}

}  // namespace

AgentResult RunGroupAgent(const AgentContext& context) {
  GroupAgent agent(context);
  return agent.Run();
}

}  // namespace sg
