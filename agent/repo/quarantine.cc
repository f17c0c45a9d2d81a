#include "agent/repo/quarantine.h"

#include <unistd.h>

#include <algorithm>

#include "agent/repo/store_layout.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/strings.h"

namespace sg {
namespace {

std::string HostNameOrUnknown() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

nlohmann::ordered_json QuarantineRecord::ToJson() const {
  return {{"key", key},   {"time", time}, {"host", host},
          {"found_by", found_by}, {"seq", seq},   {"why", why}};
}

StatusOr<std::set<std::string>> ReadQuarantine(ObjectStore& store, const std::string& job) {
  SG_ASSIGN_OR_RETURN(std::vector<ObjectInfo> objects, ListAll(store, QuarantinePrefix(job)));
  std::set<std::string> keys;
  for (const ObjectInfo& o : objects) {
    if (auto key = QuarantinedKeyOf(job, o.key)) keys.insert(std::move(*key));
  }
  return keys;
}

void QuarantineObjects(ObjectStore& store, const std::string& job,
                       const std::vector<std::string>& keys, std::string_view found_by,
                       uint64_t seq, const std::string& why) {
  for (const std::string& key : keys) {
    if (!SeqOfDataKey(key)) continue;  // only data objects: a manifest's damage is its own
    QuarantineRecord record{key,  FormatUtc(SystemClock().Now(), /*millis=*/true),
                            HostNameOrUnknown(), std::string(found_by), seq, why};
    auto put = store.Put(QuarantineKey(job, key), record.ToJson().dump(2) + "\n",
                         PutCondition::CreateOnly());
    if (put.ok()) {
      LogError(
          "quarantined {} (damaged, found reading snapshot {}): new snapshots store its frames "
          "afresh, and a restore without a seq passes over every snapshot that needs it",
          key, SeqName(seq));
    } else if (!put.status().Is(StatusCode::kPreconditionFailed)) {
      LogWarn("could not quarantine the damaged object {}: {}", key, put.status().message());
    }
  }
}

std::vector<std::string> QuarantineDamaged(ObjectStore& store, const std::string& job,
                                           const SnapshotFileReader& reader, const Status& st,
                                           std::string_view found_by, uint64_t seq) {
  if (st.ok() || !IsDamage(st)) return {};
  QuarantineObjects(store, job, reader.damaged_objects(), found_by, seq, st.message());
  return reader.damaged_objects();
}

std::vector<std::string> QuarantinedReferences(const Manifest& m,
                                               const std::set<std::string>& quarantined) {
  std::vector<std::string> out;
  if (quarantined.empty()) return out;
  for (const std::string& key : m.ReferencedKeys()) {
    if (quarantined.contains(key)) out.push_back(key);
  }
  return out;
}

std::set<uint64_t> SnapshotsNeeding(SnapshotCatalog& catalog, const std::vector<uint64_t>& seqs,
                                    const std::set<std::string>& quarantined) {
  std::set<uint64_t> out;
  if (quarantined.empty()) return out;
  catalog.Prefetch(seqs);
  for (uint64_t seq : seqs) {
    auto m = catalog.ReadManifest(seq);
    if (m.ok() && !QuarantinedReferences(*m, quarantined).empty()) out.insert(seq);
  }
  return out;
}

Status ForgetQuarantined(ObjectStore& store, const std::string& job,
                         const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    Status st = store.Delete(QuarantineKey(job, key));
    if (!st.ok() && !st.Is(StatusCode::kNotFound)) return st;
  }
  return Status::Ok();
}

SnapshotHistory WithoutQuarantined(const SnapshotHistory& history) {
  SnapshotHistory clean = history;
  std::erase_if(clean.entries, [&](const SnapshotHistory::Entry& e) {
    if (!e.manifest.ok()) return false;
    const std::vector<std::string> bad = QuarantinedReferences(*e.manifest, history.quarantined);
    if (bad.empty()) return false;
    LogWarn("snapshot {} needs the quarantined object(s) {}: not counted as held by the store",
            SeqName(e.seq), Join(bad, ", "));
    return true;
  });
  return clean;
}

}  // namespace sg
