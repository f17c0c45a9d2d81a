// The round protocol of a multi-node job (docs/multi-node.md, docs/design.md
// §14): the records the agents of one job exchange through the store, and
// the decisions made on them. Pure: no clock, store or process, so each
// decision is tested with plain values (tests/unit/group_protocol_test.cc);
// agent/repo/group_store.h reads and writes the records.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/detect/checkpoint.h"
#include "agent/config/config.h"
#include "common/clock.h"
#include "common/status.h"

namespace sg {

// What a member says about itself, rewritten every group.heartbeat.
struct MemberRecord {
  std::string instance;
  std::string agent;    // this run's identity: a restarted agent is a new member
  std::string address;  // how peers reach it
  // The settings every member must share with the coordinator. The command
  // as stored and logged, its secrets redacted (RedactArgs); the comparison
  // is of `command_digest` (CommandDigest of the real one).
  std::string job;
  int nodes = 1;
  std::vector<std::string> command;
  std::string command_digest;
  uint64_t beat = 0;  // counts the rewrites, so that each one changes the record
};

// The plan of one round, written once (create-only) by the coordinator.
struct PlanMember {
  std::string instance;
  std::string agent;
  std::string address;
};
struct RoundPlan {
  uint64_t round = 0;
  int nodes = 0;
  uint64_t generation = 0;  // the coordinator's lease generation
  int port = 0;             // the master's rendezvous port
  std::vector<PlanMember> members;  // in rank order; [0] is the coordinator and master
  // The group snapshot every member restores its part of; nullopt: fresh.
  std::optional<uint64_t> resume_seq;
  std::optional<int64_t> resume_step;

  // The rank of `agent` in this round; nullopt when it is not a member.
  std::optional<int> RankOf(const std::string& agent) const;
};

// Why a round ended, written by whoever ended it (create-only, one per writer).
struct RoundEnd {
  std::string reason;  // "notice", "stale", "crash", "restore", "complete", "stop", "left"
  std::string by;      // the instance that ended it
  std::string detail;
};

// One node's part of a group snapshot: a committed snapshot of the part's
// own job (PartJob), announced to the coordinator.
struct PartRecord {
  int rank = 0;
  int64_t step = 0;
  uint64_t seq = 0;  // of the part job's snapshot
  std::string instance;
  uint64_t bytes = 0;
  uint64_t stored = 0;
};

// A committed group snapshot: every rank's part of one step (create-only;
// its presence commits the group snapshot).
struct GroupCommit {
  uint64_t seq = 0;
  uint64_t round = 0;
  int nodes = 0;
  int64_t step = 0;
  uint64_t generation = 0;
  std::string created;         // UTC
  std::vector<PartRecord> parts;  // one per rank, in rank order

  uint64_t Bytes() const;
  uint64_t Stored() const;
};

// JSON of each record, and its checked parse ("what" names the object in
// an error message).
std::string MemberToJson(const MemberRecord& m);
StatusOr<MemberRecord> ParseMember(std::string_view text, const std::string& what);
std::string PlanToJson(const RoundPlan& p);
StatusOr<RoundPlan> ParsePlan(std::string_view text, const std::string& what);
std::string RoundEndToJson(const RoundEnd& e);
StatusOr<RoundEnd> ParseRoundEnd(std::string_view text, const std::string& what);
std::string PartToJson(const PartRecord& p);
StatusOr<PartRecord> ParsePart(std::string_view text, const std::string& what);
std::string GroupCommitToJson(const GroupCommit& g);
StatusOr<GroupCommit> ParseGroupCommit(std::string_view text, const std::string& what);

// A digest of a trainer's command (PBKDF2-HMAC-SHA-256, salted with the
// job, hex): two commands are the same when their digests are, and the
// digest of a command with a weak password in it is slow to search.
std::string CommandDigest(const std::string& job, const std::vector<std::string>& command);
// A digest, of the same kind, of the settings the nodes of a job share: the
// effective config without what differs from node to node (checkpoint_dir,
// log_dir, log_level, log_format, imds, group.address, store credentials'
// place). A job failed with one digest is tried again with another.
std::string SettingsDigest(const Config& config);

// The member record this agent writes for `config`.
MemberRecord OwnRecord(const Config& config, const std::string& instance,
                       const std::string& agent, const std::string& address);

// The first setting (job, nodes, command) in which `member` differs from
// the coordinator's, as "nodes: 3 here, 2 on the coordinator i-0abc";
// nullopt when they agree. Commands are compared by digest and named
// redacted.
std::optional<std::string> ConfigDifference(const MemberRecord& member,
                                            const MemberRecord& coordinator);

// Which members are alive. A member is stale when its record has not
// changed for `timeout` of the observer's own monotonic clock (clocks of
// different hosts are never compared), or when it is gone from the store.
class MemberFreshness {
 public:
  explicit MemberFreshness(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  // The records now listed: instance -> (etag, record).
  void Observe(Clock::MonoTime now, const std::map<std::string, std::pair<std::string, MemberRecord>>&
                                        listed);
  bool Fresh(const std::string& agent, Clock::MonoTime now) const;
  // The fresh members' records, by agent identity.
  std::vector<MemberRecord> FreshMembers(Clock::MonoTime now) const;
  // Seconds since the member's record last changed; nullopt when unknown.
  std::optional<double> Age(const std::string& agent, Clock::MonoTime now) const;

 private:
  struct Seen {
    std::string etag;
    Clock::MonoTime changed;
    MemberRecord record;
  };
  std::chrono::milliseconds timeout_;
  std::map<std::string, Seen> seen_;  // by agent identity
};

// Whether `self` may try to take the job's lease (become the coordinator):
// a member that is not in the newest plan leaves it to that round's members
// while one of them is fresh, so that rank 0 and the master stay on a node
// of the last round rather than move to a newcomer with an empty disk
// (docs/design.md, section 14).
bool MayCoordinate(const MemberRecord& self, const std::optional<RoundPlan>& newest,
                   const std::vector<MemberRecord>& fresh);

// The coordinator's plan for the next round: itself as rank 0 and master,
// then the other fresh members; members of the previous round keep their
// order, newcomers follow by instance id. Members whose settings differ
// from the coordinator's (ConfigDifference) take no part. Nullopt unless
// `nodes` members can take part; more than that: the last in that order wait.
std::optional<RoundPlan> PlanNextRound(const MemberRecord& coordinator,
                                       const std::vector<MemberRecord>& fresh, int nodes,
                                       const std::optional<RoundPlan>& previous, uint64_t round,
                                       uint64_t generation, int port,
                                       std::optional<uint64_t> resume_seq,
                                       std::optional<int64_t> resume_step);

// The step whose group snapshot can be committed now: the newest step that
// has a part from every rank 0..nodes-1, newer than `committed_step`.
// `parts` may hold several parts per rank (several steps, or a rank whose
// part was uploaded twice: the newest seq wins).
std::optional<std::vector<PartRecord>> CompleteGroup(const std::vector<PartRecord>& parts,
                                                     int nodes,
                                                     std::optional<int64_t> committed_step);

// What the ends written for a round mean to a member of it.
enum class RoundOutcome {
  kRunning,          // no end yet
  kComplete,         // the job is complete: exit 0
  kCheckpointFirst,  // a notice or SIGTERM somewhere: checkpoint, commit, then stop
  kStopNow,          // a stale member, a crash, a failed restore, a member that left: stop at once
};
RoundOutcome OutcomeOfEnds(const std::vector<RoundEnd>& ends);

// The group snapshot the next round resumes from: the newest, passing over
// `skip_from` and newer (a snapshot a member could not restore) and the
// `suspect` ones (agent/repo/group_suspect.h); nullopt: start fresh.
std::optional<GroupCommit> ResumePoint(const std::vector<GroupCommit>& oldest_first,
                                       std::optional<uint64_t> skip_from,
                                       const std::set<uint64_t>& suspect = {});

// Whether the group snapshot of step `group_step` answers a round's request
// for a checkpoint: every one of the `nodes` ranks has said at which step it
// was asked (`asked`: rank -> its newest local step then, nullopt for none),
// the group snapshot is newer than what at least one rank had when asked (so
// a trainer saved it after the request), and not older than what any rank
// had. Ranks see the request at different times, and the trainers agree
// among themselves on the step they save: a rank asked late may already
// hold the answer, saved on another node's request (docs/design.md §14).
bool AnswersRequest(const std::map<int, std::optional<int64_t>>& asked, int nodes,
                    std::optional<int64_t> group_step);

// Which of this node's complete local checkpoints to upload as its part
// next. Parts of different ranks only make a group snapshot when they are of
// one step, so a step another rank announced comes first (kFollow: the
// highest such step, newer than the newest group snapshot, that this node has
// on disk and has not uploaded). Then this node's own reasons, each for its
// newest step: the answer to a request for a checkpoint (once per request,
// newer than `asked_after`), the last checkpoint of a trainer that finished,
// and the periodic upload when `periodic_due`.
struct UploadInput {
  int rank = 0;
  std::vector<int64_t> local_steps;  // of the complete local checkpoints
  std::vector<int64_t> uploaded;     // steps this node uploaded (or tried) in the round
  std::vector<PartRecord> parts;     // announced in the round, by every rank
  std::optional<int64_t> committed_step;  // of the newest group snapshot
  bool asked = false;                     // a checkpoint was asked for, and not answered yet
  std::optional<int64_t> asked_after;     // the newest local step when it was asked
  bool trainer_done = false;
  bool periodic_due = false;
};
enum class UploadReason { kFollow, kAnswer, kLast, kPeriodic };
struct UploadChoice {
  int64_t step = 0;
  UploadReason reason = UploadReason::kPeriodic;
};
std::optional<UploadChoice> ChooseUpload(const UploadInput& in);

// Whether `c` was there, unchanged, when the node joined the round
// (`before`, taken after the restore): a step of an earlier round that the
// group never committed, which the trainer will pass again and rewrite. It
// is not this round's part until then (docs/design.md §14).
bool FromBeforeTheRound(const Checkpoint& c, const std::vector<CheckpointMark>& before);

}  // namespace sg
