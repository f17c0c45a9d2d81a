#include "agent/repo/restore_marker.h"

#include <nlohmann/json.hpp>

#include "common/files.h"

namespace sg {
const RestoreMarker::File* RestoreMarker::Find(const std::string& relpath) const {
  const auto it = files.find(relpath);
  return it == files.end() ? nullptr : &it->second;
}

bool RestoreMarker::Owns(const std::string& relpath, const struct stat& st) const {
  const File* f = Find(relpath);
  return f && S_ISREG(st.st_mode) && f->inode == static_cast<uint64_t>(st.st_ino) &&
         f->size == static_cast<uint64_t>(st.st_size) && f->mtime_ns == MtimeNs(st);
}

std::optional<RestoreMarker> ReadRestoreMarker(const std::string& dir) {
  auto text = ReadFileToString(JoinRelPath(dir, kRestoreMarkerName));
  if (!text.ok()) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  RestoreMarker m;
  try {
    m.id = j.at("id").get<std::string>();
    m.seq = j.at("seq").get<uint64_t>();
    const auto& files = j.at("files");
    m.files.reserve(files.size());
    for (const auto& f : files) {
      m.files.emplace(
          f.at("path").get<std::string>(),
          RestoreMarker::File{f.at("inode").get<uint64_t>(), f.at("size").get<uint64_t>(),
                              f.at("mtime_ns").get<int64_t>()});
    }
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // not ours to trust: nothing counts as restore's
  }
  return m;
}

Status WriteRestoreMarker(const std::string& dir, const std::string& id, uint64_t seq,
                          const std::vector<std::string>& paths) {
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const std::string& p : paths) {
    struct stat st {};
    if (::lstat(JoinRelPath(dir, p).c_str(), &st) != 0)
      return Status::FromErrno(errno, "stat " + JoinRelPath(dir, p));
    files.push_back({{"path", p},
                     {"inode", static_cast<uint64_t>(st.st_ino)},
                     {"size", static_cast<uint64_t>(st.st_size)},
                     {"mtime_ns", MtimeNs(st)}});
  }
  const nlohmann::ordered_json j = {{"id", id}, {"seq", seq}, {"files", std::move(files)}};
  return WriteFileAtomic(JoinRelPath(dir, kRestoreMarkerName), j.dump() + "\n");
}

}  // namespace sg
