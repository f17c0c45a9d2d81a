// The records of a multi-node job in the store (docs/multi-node.md,
// docs/design.md §14), read and written here and nowhere else:
//
//   <job>/group/members/<agent>.json            a member, rewritten every group.heartbeat
//   <job>/group/failed.json                     the job failed; every member exits 1
//   <job>/group/refused/<agent>.json            a member the coordinator refused, and why
//   <job>/group/rounds/<round>/plan.json        the round's plan (create-only, the coordinator)
//   <job>/group/rounds/<round>/end/<instance>.json   the round is over (create-only, anyone)
//   <job>/group/rounds/<round>/parts/<step>-<rank>-<seq>.json  a node's part is committed
//   <job>/group/rounds/<round>/done/<rank>.json  the rank's trainer exited 0
//   <job>/group/rounds/<round>/asked/<rank>.json the rank was asked for a checkpoint
//   <job>/group/rounds/<round>/final.json        the group snapshot that answers it
//   <job>/groups/<seq>.json                     a group snapshot (create-only: the commit)
//   <job>/nodes/<rank>/snapshots/...            each rank's parts, as snapshots of their own
//
// <round> and <seq> are ten digits, <step> twenty, so name order is numeric
// order. The record types and decisions are agent/repo/group_protocol.h's.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/repo/group_protocol.h"
#include "common/object_store.h"

namespace sg {

// A record whose key was listed but whose content cannot be read: skipped for
// what it says, never for the seq or round its key holds (docs/design.md §14).
struct UnreadableRecord {
  std::string key;
  std::string why;
};

// The group snapshots as listed: the readable ones, oldest first, and the
// highest seq any key holds, readable or not, from which the next commit's
// seq is taken.
struct GroupListing {
  std::vector<GroupCommit> groups;
  uint64_t newest_seq = 0;
  std::vector<UnreadableRecord> unreadable;
  uint64_t NextSeq() const { return newest_seq + 1; }
};

// The rounds' plans as listed: the newest readable plan, and the highest
// round any plan key holds, from which the next round's number is taken.
struct PlanListing {
  std::optional<RoundPlan> newest;
  uint64_t newest_round = 0;
  std::vector<UnreadableRecord> unreadable;  // plans newer than `newest`
  uint64_t NextRound() const { return newest_round + 1; }
};

// Why a job of several nodes failed (group/failed.json): too many rounds in
// a row ended by a crash. `settings` is the SettingsDigest of the config
// that failed: an agent whose config differs clears the record.
struct FailureRecord {
  std::string why;
  std::string time;      // UTC
  uint64_t round = 0;    // the last round that crashed
  std::string settings;  // empty in records of older agents
};

class GroupStore {
 public:
  GroupStore(ObjectStore& store, std::string job) : store_(store), job_(std::move(job)) {}

  // This member's record (overwritten each time), and its removal.
  Status WriteMember(const MemberRecord& m);
  Status RemoveMember(const std::string& agent);
  // Every member record: instance -> (etag, record); unreadable ones are
  // skipped with a warning.
  StatusOr<std::map<std::string, std::pair<std::string, MemberRecord>>> Members();

  // The coordinator refuses a member whose settings differ from its own
  // (create-only; the first reason stands); the member reads why and exits.
  Status Refuse(const std::string& agent, const std::string& why);
  StatusOr<std::optional<std::string>> Refusal(const std::string& agent);

  // The job failed (too many crashes): every member stops and exits 1,
  // until the record is cleared (`spotguard reset-failure`, or an agent
  // whose settings differ from the failed ones).
  Status MarkFailed(const FailureRecord& failure);
  StatusOr<std::optional<FailureRecord>> Failed();
  Status ClearFailure();

  // The newest round that has a readable plan, and that plan; nullopt before
  // the first.
  StatusOr<std::optional<RoundPlan>> NewestPlan();
  // The same, with the highest round listed and the unreadable newer plans.
  StatusOr<PlanListing> Plans();
  // Writes round p.round's plan; PreconditionFailed when one exists already
  // (of two coordinators, only one writes a round's plan).
  Status WritePlan(const RoundPlan& p);

  // Ends `round` (create-only per instance; ending it twice is no error).
  Status EndRound(uint64_t round, const RoundEnd& end);
  // The ends written for `round`; empty while it runs.
  StatusOr<std::vector<RoundEnd>> Ends(uint64_t round);

  // Announces a committed part, and lists those of `round`.
  Status AnnouncePart(uint64_t round, const PartRecord& part);
  StatusOr<std::vector<PartRecord>> Parts(uint64_t round);

  // A rank was asked for a checkpoint when its newest local step was
  // `after` (create-only); and every rank's, by rank.
  Status MarkAsked(uint64_t round, int rank, std::optional<int64_t> after);
  StatusOr<std::map<int, std::optional<int64_t>>> Asked(uint64_t round);
  // A rank's agent was warned (a rebalance recommendation) when its newest
  // local step was `step` (create-only): every member asks its own trainer
  // for a checkpoint, so the group flushes together; and every rank's, by
  // rank (docs/design.md §14, "A group flush").
  Status MarkFlush(uint64_t round, int rank, std::optional<int64_t> step);
  StatusOr<std::map<int, std::optional<int64_t>>> Flushes(uint64_t round);
  // The group snapshot that answers a round's request for a checkpoint: the
  // first one newer than every rank's step when it was asked (create-only).
  Status WriteFinal(uint64_t round, uint64_t seq, int64_t step);
  StatusOr<std::optional<uint64_t>> Final(uint64_t round);

  // A rank's trainer exited 0 in `round`, its last part being of `step`.
  Status MarkDone(uint64_t round, int rank, std::optional<int64_t> step);
  // rank -> the step of its last part, for the ranks done in `round`.
  StatusOr<std::map<int, std::optional<int64_t>>> Done(uint64_t round);

  // Commits a group snapshot (create-only at g.seq = ListGroups().NextSeq());
  // PreconditionFailed when that seq is taken.
  Status CommitGroup(const GroupCommit& g);
  // The committed group snapshots, oldest first; damaged ones are skipped
  // with a warning (once each).
  StatusOr<std::vector<GroupCommit>> Groups();
  // The same, with the highest seq listed and the damaged records.
  StatusOr<GroupListing> ListGroups();

  std::string MemberKey(const std::string& agent) const;
  std::string MembersPrefix() const;
  std::string RoundPrefix(uint64_t round) const;
  std::string GroupKey(uint64_t seq) const;
  std::string FailureKey() const;

 private:
  // Reads each object once: plans, ends, parts and group snapshots never
  // change once written (create-only), and of a member record only its etag
  // (from the listing) changes. So a look at the round costs LISTs, plus a
  // GET for what is new. A record that cannot be parsed is remembered too
  // (with its etag), warned about once and not read again until it changes.
  template <typename T, typename Parse>
  StatusOr<std::optional<T>> ReadOnce(std::map<std::string, T>& cache, const ObjectInfo& object,
                                      Parse parse);

  ObjectStore& store_;
  const std::string job_;
  std::map<std::string, MemberRecord> members_;
  std::map<std::string, RoundEnd> ends_;
  std::map<std::string, PartRecord> parts_;
  std::map<std::string, GroupCommit> groups_;
  std::map<std::string, RoundPlan> plans_;
  std::map<std::string, std::pair<std::string, std::string>> unreadable_;  // key -> (etag, why)
};

}  // namespace sg
