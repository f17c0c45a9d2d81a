#include "agent/repo/manifest.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <utility>

#include "agent/repo/store_layout.h"
#include "common/strings.h"
#include "common/xxh3.h"

namespace sg {

uint64_t ManifestFile::FrameRawSize(size_t i) const {
  const uint64_t start = static_cast<uint64_t>(i) * frame_size;
  return start >= size ? 0 : std::min(frame_size, size - start);
}

void ManifestFile::AppendOwnFrame(uint64_t stored, std::string frame_sha256) {
  const uint64_t offset = frames.empty() ? 0 : frames.back().offset + frames.back().stored;
  frames.push_back(FrameRef{key, offset, stored, std::move(frame_sha256), {}});
  stored_size += stored;
}

uint64_t Manifest::TotalSize() const {
  uint64_t n = 0;
  for (const ManifestFile& f : files) n += f.size;
  return n;
}

uint64_t Manifest::TotalStored() const {
  uint64_t n = 0;
  for (const ManifestFile& f : files) n += f.stored_size;
  return n;
}

uint64_t Manifest::NewStored() const {
  // Each stored frame of this snapshot's objects once, however many files
  // reference it.
  const std::string own = SnapshotObjectsPrefix(seq);
  std::set<std::pair<std::string_view, uint64_t>> seen;
  uint64_t n = 0;
  for (const ManifestFile& f : files) {
    for (const FrameRef& r : f.frames) {
      if (r.key.starts_with(own) && seen.emplace(r.key, r.offset).second) n += r.stored;
    }
  }
  return n;
}

uint64_t Manifest::ReusedStored() const { return TotalStored() - NewStored(); }

std::vector<std::string> Manifest::ReferencedKeys() const {
  std::set<std::string> keys;
  for (const ManifestFile& f : files) {
    for (const FrameRef& r : f.frames) keys.insert(r.key);
  }
  return {keys.begin(), keys.end()};
}

Status CheckRelativePath(std::string_view path) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("path \"" + std::string(path) + "\" " + std::string(why));
  };
  if (path.empty()) return bad("is empty");
  if (path.size() > 4096) return bad("is longer than 4096 bytes");
  if (path.find('\0') != std::string_view::npos) return bad("contains a NUL byte");
  if (path.front() == '/') return bad("is absolute");
  for (const std::string& seg : Split(path, '/')) {
    if (seg == "..") return bad("climbs out with \"..\"");
    if (seg.empty() || seg == ".") return bad("has an empty or \".\" segment");
  }
  return Status::Ok();
}

nlohmann::ordered_json ManifestToJson(const Manifest& m) {
  nlohmann::ordered_json j;
  j["format"] = m.format == 1   ? kManifestFormat1
                : m.format == 2 ? kManifestFormat2
                                : kManifestFormat3;
  j["job"] = m.job;
  j["seq"] = m.seq;
  j["generation"] = m.generation;
  j["created"] = m.created;
  j["instance"] = m.instance;
  if (m.index) j["index"] = *m.index;
  if (m.attempt) j["attempt"] = *m.attempt;
  j["preset"] = m.preset;
  j["step"] = m.step ? nlohmann::ordered_json(*m.step) : nlohmann::ordered_json(nullptr);
  j["resume"] = m.resume;
  j["files"] = nlohmann::ordered_json::array();
  for (const ManifestFile& f : m.files) {
    nlohmann::ordered_json jf;
    jf["path"] = f.path;
    jf["size"] = f.size;
    jf["mode"] = f.mode;
    if (m.format <= 2) jf["sha256"] = f.sha256;
    jf["key"] = f.key;
    jf["stored_size"] = f.stored_size;
    jf["codec"] = CodecName(f.codec);
    jf["frame_size"] = f.frame_size;
    nlohmann::ordered_json frames = nlohmann::ordered_json::array();
    for (const FrameRef& r : f.frames) {
      if (m.format == 1) {
        frames.push_back(r.stored);
        continue;
      }
      // {"key"?, "offset", "stored", "sha256", "xxh3"?}; "key" only when the
      // frame lives outside the file's own object, "xxh3" only when known.
      nlohmann::ordered_json jr;
      if (r.key != f.key) jr["key"] = r.key;
      jr["offset"] = r.offset;
      jr["stored"] = r.stored;
      jr["sha256"] = r.sha256;
      if (!r.xxh3.empty()) jr["xxh3"] = r.xxh3;
      frames.push_back(std::move(jr));
    }
    jf["frames"] = std::move(frames);
    j["files"].push_back(std::move(jf));
  }
  return j;
}

namespace {

// nlohmann's get<uint64_t>() converts floats (undefined behaviour when out of
// range) and wraps negative numbers; a manifest's numbers are whole and >= 0.
struct BadNumber : std::runtime_error {
  using std::runtime_error::runtime_error;
};

uint64_t WholeNumber(const nlohmann::json& v, const char* name) {
  if (!v.is_number_unsigned())
    throw BadNumber(std::string("\"") + name + "\" is not a whole number >= 0");
  return v.get<uint64_t>();
}

bool IsHexSha256(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// ParseManifest's error: `where` names the manifest.
Status ManifestCorrupt(const std::string& where, const std::string& why) {
  return Status::Corruption(where + ": " + why);
}

// The manifest's fields besides "files" into `m`. Throws
// nlohmann::json::exception or BadNumber on a missing or mistyped one.
void ReadManifestHeader(const nlohmann::json& j, Manifest& m) {
  m.job = j.at("job").get<std::string>();
  m.seq = WholeNumber(j.at("seq"), "seq");
  // Every writer since the first release records who committed the
  // snapshot and when; a manifest without them was not written by one.
  m.generation = WholeNumber(j.at("generation"), "generation");
  m.created = j.at("created").get<std::string>();
  m.instance = j.at("instance").get<std::string>();
  // Shown, never acted on: a value of another shape is ignored.
  for (auto [key, out] : {std::pair{"index", &m.index}, std::pair{"attempt", &m.attempt}}) {
    if (auto it = j.find(key); it != j.end() && it->is_number_unsigned()) {
      *out = static_cast<int64_t>(std::min<uint64_t>(it->get<uint64_t>(), INT64_MAX));
    }
  }
  m.preset = j.value("preset", "");
  if (j.contains("step") && !j["step"].is_null()) {
    if (!j["step"].is_number_integer()) throw BadNumber("\"step\" is not a whole number");
    m.step = j["step"].get<int64_t>();
  }
  m.resume = j.value("resume", "");
}

// The "frames" of a file entry, in manifest format `format`, into `f`.
// Throws like ReadManifestHeader.
void ReadManifestFrames(const nlohmann::json& frames, int format, ManifestFile& f) {
  if (!frames.is_array()) throw BadNumber("\"frames\" is not a list");
  uint64_t offset = 0;
  for (const nlohmann::json& s : frames) {
    if (format == 1) {
      const uint64_t stored = WholeNumber(s, "frames");
      f.frames.push_back(FrameRef{f.key, offset, stored, {}, {}});
      offset += stored;  // checked against stored_size below
      if (offset < stored) throw BadNumber("\"frames\" do not add up");
      continue;
    }
    if (!s.is_object()) throw BadNumber("a frame is not an object");
    FrameRef r;
    r.key = s.contains("key") ? s.at("key").get<std::string>() : f.key;
    r.offset = WholeNumber(s.at("offset"), "offset");
    r.stored = WholeNumber(s.at("stored"), "stored");
    r.sha256 = s.at("sha256").get<std::string>();
    if (s.contains("xxh3")) r.xxh3 = s.at("xxh3").get<std::string>();
    f.frames.push_back(std::move(r));
  }
}

// One entry of "files". Throws like ReadManifestHeader; an unknown codec is
// returned as ParseCodec's error.
StatusOr<ManifestFile> ReadManifestFileEntry(const nlohmann::json& jf, int format) {
  ManifestFile f;
  f.path = jf.at("path").get<std::string>();
  f.size = WholeNumber(jf.at("size"), "size");
  const uint64_t mode = WholeNumber(jf.at("mode"), "mode");
  if (mode > 07777)
    throw BadNumber("\"mode\" " + std::to_string(mode) + " is not a permission mode");
  f.mode = static_cast<uint32_t>(mode);
  if (format <= 2) f.sha256 = jf.at("sha256").get<std::string>();
  f.key = jf.at("key").get<std::string>();
  f.stored_size = WholeNumber(jf.at("stored_size"), "stored_size");
  auto codec = ParseCodec(jf.at("codec").get<std::string>());
  if (!codec.ok()) return codec.status();
  f.codec = *codec;
  f.frame_size = WholeNumber(jf.at("frame_size"), "frame_size");
  ReadManifestFrames(jf.at("frames"), format, f);
  return f;
}

// The frames of `f` (of snapshot `seq`, in manifest format `format`): they
// add up to its stored size and (formats 2 and 3) lie in the job's snapshots.
Status CheckManifestFrames(const ManifestFile& f, int format, uint64_t seq,
                           const std::string& where) {
  uint64_t stored = 0;
  for (size_t i = 0; i < f.frames.size(); ++i) {
    const FrameRef& r = f.frames[i];
    const std::string frame = "file \"" + f.path + "\" frame " + std::to_string(i);
    if (r.stored > f.stored_size - stored)
      return ManifestCorrupt(where, "file \"" + f.path + "\" frames do not add up");
    stored += r.stored;
    if (format == 1) continue;
    // A frame lives in a data object of this snapshot or an earlier one of
    // the same job (docs/format.md, "References").
    const auto key_seq = SeqOfDataKey(r.key);
    if (!key_seq || *key_seq > seq || !CheckRelativePath(r.key).ok()) {
      return ManifestCorrupt(where, frame + " points outside the job's snapshots: " + r.key);
    }
    if (r.stored == 0 || r.offset > UINT64_MAX - r.stored) {
      return ManifestCorrupt(where, frame + " has offset " + std::to_string(r.offset) +
                                        " and size " + std::to_string(r.stored));
    }
    if (!IsHexSha256(r.sha256)) return ManifestCorrupt(where, frame + " has a malformed sha256");
    if (!r.xxh3.empty() && !IsHexXxh3(r.xxh3)) {
      return ManifestCorrupt(where, frame + " has a malformed xxh3");
    }
  }
  if (stored != f.stored_size) {
    return ManifestCorrupt(where, "file \"" + f.path + "\" frames do not add up");
  }
  return Status::Ok();
}

// One file of the manifest of snapshot `seq`; `paths` gathers the paths so
// far (a path may appear once).
Status CheckManifestFileEntry(const ManifestFile& f, int format, uint64_t seq,
                              const std::string& key_prefix, std::set<std::string>& paths,
                              const std::string& where) {
  auto corrupt = [&](const std::string& why) { return ManifestCorrupt(where, why); };
  if (Status st = CheckRelativePath(f.path); !st.ok()) return corrupt(st.message());
  if (!paths.insert(f.path).second) return corrupt("path \"" + f.path + "\" appears twice");
  if (!f.key.starts_with(key_prefix) || !CheckRelativePath(f.key).ok()) {
    return corrupt("file \"" + f.path + "\" points outside the snapshot: " + f.key);
  }
  if (f.mode > 07777) return corrupt("file \"" + f.path + "\" has mode " + std::to_string(f.mode));
  if (format <= 2 && !IsHexSha256(f.sha256)) {
    return corrupt("file \"" + f.path + "\" has a malformed sha256");
  }
  if (f.frame_size == 0 || f.frame_size > (1ull << 30)) {
    return corrupt("file \"" + f.path + "\" has frame size " + std::to_string(f.frame_size));
  }
  // Not (size + frame_size - 1) / frame_size: that wraps for sizes near 2^64.
  const uint64_t want_frames = f.size / f.frame_size + (f.size % f.frame_size != 0 ? 1 : 0);
  if (f.frames.size() != want_frames) {
    return corrupt("file \"" + f.path + "\" has " + std::to_string(f.frames.size()) +
                   " frames for " + std::to_string(f.size) + " bytes");
  }
  return CheckManifestFrames(f, format, seq, where);
}

// What ParseManifest checks once the fields are read: that `m` is snapshot
// `seq` of `job`, and every file and frame in it.
Status CheckManifestContent(const Manifest& m, const std::string& job, uint64_t seq,
                            const std::string& where) {
  auto corrupt = [&](const std::string& why) { return ManifestCorrupt(where, why); };
  if (m.job != job) return corrupt("belongs to job \"" + m.job + "\"");
  // Restoring nothing would swap an empty directory in for the checkpoint.
  if (m.files.empty()) return corrupt("lists no files");
  if (m.created.empty()) return corrupt("\"created\" is empty");
  if (m.seq != seq) return corrupt("says it is snapshot " + SeqName(m.seq));
  if (!m.resume.empty()) {
    if (Status st = CheckRelativePath(m.resume); !st.ok()) return corrupt("resume " + st.message());
  }
  std::set<std::string> paths;
  const std::string key_prefix = FileObjectsPrefix(seq);
  for (const ManifestFile& f : m.files) {
    SG_RETURN_IF_ERROR(CheckManifestFileEntry(f, m.format, seq, key_prefix, paths, where));
  }
  // A file may not also be a directory of another file ("a" and "a/b").
  for (const std::string& p : paths) {
    auto it = paths.lower_bound(p + "/");
    if (it != paths.end() && it->starts_with(p + "/")) {
      return corrupt("path \"" + p + "\" is both a file and a directory");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Manifest> ParseManifest(std::string_view text, const std::string& job, uint64_t seq) {
  const std::string where = "manifest of snapshot " + SeqName(seq);
  auto corrupt = [&](const std::string& why) { return ManifestCorrupt(where, why); };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return corrupt("not a JSON object");
  // Not j.value("format", ""): that throws when "format" is not a string.
  const auto format = j.find("format");
  const std::string format_name =
      format != j.end() && format->is_string() ? format->get<std::string>() : "";
  Manifest m;
  if (format_name == kManifestFormat1) {
    m.format = 1;
  } else if (format_name == kManifestFormat2) {
    m.format = 2;
  } else if (format_name == kManifestFormat3) {
    m.format = 3;
  } else {
    return corrupt("format is not \"" + std::string(kManifestFormat1) + "\", \"" +
                   std::string(kManifestFormat2) + "\" or \"" + std::string(kManifestFormat3) +
                   "\"");
  }
  try {
    ReadManifestHeader(j, m);
    const nlohmann::json& files = j.at("files");
    if (!files.is_array()) throw BadNumber("\"files\" is not a list");
    for (const auto& jf : files) {
      StatusOr<ManifestFile> f = ReadManifestFileEntry(jf, m.format);
      if (!f.ok()) return corrupt(f.status().message());
      m.files.push_back(std::move(*f));
    }
  } catch (const nlohmann::json::exception& e) {
    return corrupt(std::string("missing or mistyped field: ") + e.what());
  } catch (const BadNumber& e) {
    return corrupt(e.what());
  }
  SG_RETURN_IF_ERROR(CheckManifestContent(m, job, seq, where));
  return m;
}

}  // namespace sg
