#include "agent/repo/store_layout.h"

#include <cstdio>
#include <string>

namespace sg {
namespace {

constexpr std::string_view kManifestName = "manifest.json";
constexpr std::string_view kSuspectName = "suspect.json";
constexpr std::string_view kQuarantineSuffix = ".json";
constexpr std::string_view kJson = ".json";

// The seq of "<job>/snapshots/<seq>/<name>".
std::optional<uint64_t> SeqOfSnapshotObject(const std::string& job, std::string_view key,
                                            std::string_view name) {
  const std::string prefix = SnapshotsPrefix(job);
  if (key.size() != prefix.size() + 11 + name.size() || !key.starts_with(prefix) ||
      !key.ends_with(name) || key[prefix.size() + 10] != '/') {
    return std::nullopt;
  }
  return ParseSeqName(key.substr(prefix.size(), 10));
}

}  // namespace

std::string JobPrefix(const std::string& job) { return job + "/"; }
std::string SnapshotsPrefix(const std::string& job) { return JobPrefix(job) + "snapshots/"; }
std::string SnapshotPrefix(const std::string& job, uint64_t seq) {
  return SnapshotsPrefix(job) + SeqName(seq) + "/";
}
std::string ManifestKey(const std::string& job, uint64_t seq) {
  return SnapshotPrefix(job, seq) + std::string(kManifestName);
}
std::string ClaimKey(const std::string& job, uint64_t seq) {
  return SnapshotPrefix(job, seq) + "claim";
}
std::string LatestKey(const std::string& job) { return JobPrefix(job) + "latest"; }

std::string SnapshotObjectsPrefix(uint64_t seq) { return "snapshots/" + SeqName(seq) + "/"; }

std::string FileObjectsPrefix(uint64_t seq) { return SnapshotObjectsPrefix(seq) + "files/"; }

std::string FileObjectKey(uint64_t seq, const std::string& path, Codec codec) {
  return FileObjectsPrefix(seq) + path + (codec == Codec::kNone ? "" : ".zst");
}

std::string PackObjectKey(uint64_t seq, int number) {
  std::string n = std::to_string(number);
  if (n.size() < 6) n.insert(0, 6 - n.size(), '0');
  return SnapshotObjectsPrefix(seq) + "packs/pack-" + n + ".zst";
}

std::optional<uint64_t> SeqOfDataKey(std::string_view key) {
  constexpr std::string_view kTop = "snapshots/";
  if (!key.starts_with(kTop)) return std::nullopt;
  const std::string_view rest = key.substr(kTop.size());
  // "<seq>/files/x" or "<seq>/packs/x": ten digits, '/', six bytes, a name.
  if (rest.size() <= 17 || rest[10] != '/') return std::nullopt;
  const std::string_view kind = rest.substr(11, 6);
  if (kind != "files/" && kind != "packs/") return std::nullopt;
  return ParseSeqName(rest.substr(0, 10));
}

std::optional<uint64_t> SnapshotSeqOfKey(const std::string& job, std::string_view key) {
  const std::string prefix = SnapshotsPrefix(job);
  if (!key.starts_with(prefix)) return std::nullopt;
  const std::string_view rest = key.substr(prefix.size());
  if (rest.size() <= 11 || rest[10] != '/') return std::nullopt;
  return ParseSeqName(rest.substr(0, 10));
}

std::optional<uint64_t> ManifestSeqOfKey(const std::string& job, std::string_view key) {
  return SeqOfSnapshotObject(job, key, kManifestName);
}

std::string SuspectKey(const std::string& job, uint64_t seq) {
  return SnapshotPrefix(job, seq) + std::string(kSuspectName);
}

std::optional<uint64_t> SuspectSeqOfKey(const std::string& job, std::string_view key) {
  return SeqOfSnapshotObject(job, key, kSuspectName);
}

std::string LeaseKey(const std::string& job) { return JobPrefix(job) + "lease"; }
std::string CompleteKey(const std::string& job) { return JobPrefix(job) + "complete"; }

std::string FencesPrefix(const std::string& job) { return JobPrefix(job) + "fences/"; }

std::string FenceKey(const std::string& job, const Fence& fence) {
  return FencesPrefix(job) + SeqName(fence.generation) + "-" + SeqName(fence.after_seq);
}

std::optional<Fence> ParseFenceKey(const std::string& job, const std::string& key) {
  const std::string prefix = FencesPrefix(job);
  if (!key.starts_with(prefix)) return std::nullopt;
  const std::string_view rest = std::string_view(key).substr(prefix.size());
  if (rest.size() != 21 || rest[10] != '-') return std::nullopt;
  auto generation = ParseSeqName(rest.substr(0, 10));
  auto after = ParseSeqName(rest.substr(11));
  if (!generation || !after) return std::nullopt;
  return Fence{*generation, *after};
}

std::string QuarantinePrefix(const std::string& job) { return JobPrefix(job) + "quarantine/"; }

std::string QuarantineKey(const std::string& job, std::string_view data_key) {
  return QuarantinePrefix(job) + std::string(data_key) + std::string(kQuarantineSuffix);
}

std::optional<std::string> QuarantinedKeyOf(const std::string& job, std::string_view key) {
  const std::string prefix = QuarantinePrefix(job);
  if (!key.starts_with(prefix) || !key.ends_with(kQuarantineSuffix)) return std::nullopt;
  key.remove_prefix(prefix.size());
  key.remove_suffix(kQuarantineSuffix.size());
  if (!SeqOfDataKey(key)) return std::nullopt;
  return std::string(key);
}

std::string EventsPrefix(const std::string& job) { return JobPrefix(job) + "events/"; }

std::string EventKey(const std::string& job, std::string_view stamp, std::string_view kind) {
  return EventsPrefix(job) + std::string(stamp) + "-" + std::string(kind) + ".json";
}

std::string EventKindOfKey(std::string_view key) {
  const size_t slash = key.rfind('/');
  std::string_view name = key.substr(slash == std::string_view::npos ? 0 : slash + 1);
  if (name.ends_with(".json")) name.remove_suffix(5);
  const size_t dash = name.find('-');
  return dash == std::string_view::npos ? "" : std::string(name.substr(dash + 1));
}

std::string LogsPrefix(const std::string& job) { return JobPrefix(job) + "logs/"; }

std::string LogSegmentKey(const std::string& job, const LogSegmentName& name) {
  return LogsPrefix(job) + name.instance + "/" + SeqName(name.generation) + "-" +
         SeqName(name.seq) + "-" + name.stamp + ".log.zst";
}

std::optional<LogSegmentName> ParseLogSegmentKey(const std::string& job, std::string_view key) {
  const std::string prefix = LogsPrefix(job);
  if (!key.starts_with(prefix)) return std::nullopt;
  key.remove_prefix(prefix.size());
  const size_t slash = key.find('/');
  if (slash == std::string_view::npos || slash == 0) return std::nullopt;
  LogSegmentName name;
  name.instance = std::string(key.substr(0, slash));
  std::string_view rest = key.substr(slash + 1);
  if (!rest.ends_with(".log.zst") || rest.size() < 22 + 8 || rest[10] != '-' || rest[21] != '-') {
    return std::nullopt;
  }
  rest.remove_suffix(8);
  auto gen = ParseSeqName(rest.substr(0, 10));
  auto seq = ParseSeqName(rest.substr(11, 10));
  if (!gen || !seq) return std::nullopt;
  name.generation = *gen;
  name.seq = *seq;
  name.stamp = std::string(rest.substr(22));
  return name;
}

std::string DoctorProbePrefix(const std::string& job, std::string_view id) {
  return (job.empty() ? "" : JobPrefix(job)) + ".doctor/" + std::string(id) + "/";
}

std::string PartJob(const std::string& job, int rank) {
  return JobPrefix(job) + "nodes/" + std::to_string(rank);
}

std::string PartRelativeKey(int rank, std::string_view key) {
  return "nodes/" + std::to_string(rank) + "/" + std::string(key);
}

std::string RecordNameOf(std::string_view key, std::string_view prefix) {
  if (!key.starts_with(prefix) || !key.ends_with(kJson)) return "";
  std::string_view name = key.substr(prefix.size(), key.size() - prefix.size() - kJson.size());
  return name.find('/') == std::string_view::npos ? std::string(name) : "";
}

std::string GroupMembersPrefix(const std::string& job) { return JobPrefix(job) + "group/members/"; }

std::string GroupMemberKey(const std::string& job, const std::string& agent) {
  return GroupMembersPrefix(job) + agent + std::string(kJson);
}

std::string GroupRefusalKey(const std::string& job, const std::string& agent) {
  return JobPrefix(job) + "group/refused/" + agent + std::string(kJson);
}

std::string GroupFailureKey(const std::string& job) { return JobPrefix(job) + "group/failed.json"; }

std::string GroupSuspectsPrefix(const std::string& job) { return JobPrefix(job) + "group/suspect/"; }

std::string GroupSuspectKey(const std::string& job, uint64_t seq) {
  return GroupSuspectsPrefix(job) + SeqName(seq) + std::string(kJson);
}

std::optional<uint64_t> GroupSuspectSeqOfKey(const std::string& job, std::string_view key) {
  return ParseSeqName(RecordNameOf(key, GroupSuspectsPrefix(job)));
}

std::string GroupRoundsPrefix(const std::string& job) { return JobPrefix(job) + "group/rounds/"; }

std::string GroupRoundPrefix(const std::string& job, uint64_t round) {
  return GroupRoundsPrefix(job) + SeqName(round) + "/";
}

std::string GroupPlanKey(const std::string& job, uint64_t round) {
  return GroupRoundPrefix(job, round) + "plan.json";
}

std::optional<uint64_t> RoundOfPlanKey(const std::string& job, std::string_view key) {
  const std::string prefix = GroupRoundsPrefix(job);
  constexpr std::string_view kPlan = "/plan.json";
  if (!key.starts_with(prefix)) return std::nullopt;
  key.remove_prefix(prefix.size());
  if (key.size() != 10 + kPlan.size() || !key.ends_with(kPlan)) return std::nullopt;
  return ParseSeqName(key.substr(0, 10));
}

std::string GroupFinalKey(const std::string& job, uint64_t round) {
  return GroupRoundPrefix(job, round) + "final.json";
}

std::string RoundRecordsPrefix(const std::string& job, uint64_t round, RoundRecords kind) {
  const char* folder = "end/";
  switch (kind) {
    case RoundRecords::kEnds: folder = "end/"; break;
    case RoundRecords::kParts: folder = "parts/"; break;
    case RoundRecords::kDone: folder = "done/"; break;
    case RoundRecords::kAsked: folder = "asked/"; break;
    case RoundRecords::kFlush: folder = "flush/"; break;
  }
  return GroupRoundPrefix(job, round) + folder;
}

std::string RoundEndKey(const std::string& job, uint64_t round, const std::string& by) {
  return RoundRecordsPrefix(job, round, RoundRecords::kEnds) + by + std::string(kJson);
}

std::string RoundPartKey(const std::string& job, uint64_t round, int64_t step, int rank,
                         uint64_t seq) {
  char name[32];
  std::snprintf(name, sizeof name, "%020llu",
                static_cast<unsigned long long>(static_cast<uint64_t>(step) + (1ull << 63)));
  return RoundRecordsPrefix(job, round, RoundRecords::kParts) + name + "-" +
         std::to_string(rank) + "-" + SeqName(seq) + std::string(kJson);
}

std::string RoundRankKey(const std::string& job, uint64_t round, RoundRecords kind, int rank) {
  return RoundRecordsPrefix(job, round, kind) + std::to_string(rank) + std::string(kJson);
}

std::string GroupsPrefix(const std::string& job) { return JobPrefix(job) + "groups/"; }

std::string GroupKey(const std::string& job, uint64_t seq) {
  return GroupsPrefix(job) + SeqName(seq) + std::string(kJson);
}

std::optional<uint64_t> GroupSeqOfKey(const std::string& job, std::string_view key) {
  return ParseSeqName(RecordNameOf(key, GroupsPrefix(job)));
}

}  // namespace sg
