#include "agent/repo/store_layout.h"

#include <cstdio>

namespace sg {
namespace {

constexpr std::string_view kManifestName = "manifest.json";
constexpr std::string_view kSuspectName = "suspect.json";
constexpr std::string_view kQuarantineSuffix = ".json";

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

std::string SeqName(uint64_t seq) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%010llu", static_cast<unsigned long long>(seq));
  return buf;
}

std::optional<uint64_t> ParseSeqName(std::string_view name) {
  if (name.size() != 10) return std::nullopt;
  uint64_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

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

std::string FileObjectsPrefix(uint64_t seq) { return "snapshots/" + SeqName(seq) + "/files/"; }

std::string FileObjectKey(uint64_t seq, const std::string& path, Codec codec) {
  return FileObjectsPrefix(seq) + path + (codec == Codec::kNone ? "" : ".zst");
}

std::string PackObjectKey(uint64_t seq, int number) {
  std::string n = std::to_string(number);
  if (n.size() < 6) n.insert(0, 6 - n.size(), '0');
  return "snapshots/" + SeqName(seq) + "/packs/pack-" + n + ".zst";
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

std::string CompactStamp(std::string_view time_utc) {
  std::string out;
  for (char c : time_utc) {
    if (c != '-' && c != ':') out += c;
  }
  return out;
}

}  // namespace sg
