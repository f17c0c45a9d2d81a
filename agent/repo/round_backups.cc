#include "agent/repo/round_backups.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "common/files.h"

namespace sg {

namespace fs = std::filesystem;

Status MarkRoundBackup(const std::string& backup_dir, const std::string& why) {
  return WriteFileAtomic(backup_dir + "/" + kRoundBackupMark, why + "\n");
}

StatusOr<std::vector<std::string>> PruneRoundBackups(const std::string& checkpoint_dir, int keep) {
  std::string trimmed = checkpoint_dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const fs::path dir(trimmed);
  const fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  const std::string prefix = dir.filename().string() + ".spotguard-backup-";
  // Oldest first: by the time the mark was written, right after the backup
  // was made (names of one second differ only by a random suffix).
  std::vector<std::pair<fs::file_time_type, std::string>> marked;
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix) || it->is_symlink(ec) || !it->is_directory(ec)) continue;
    std::error_code mark_ec;
    const fs::file_time_type at = fs::last_write_time(it->path() / kRoundBackupMark, mark_ec);
    if (!mark_ec) marked.emplace_back(at, name);
  }
  if (ec) return Status::FromErrno(ec.value(), "list " + parent.string());
  std::sort(marked.begin(), marked.end());
  std::vector<std::string> removed;
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep, 0)) < marked.size(); ++i) {
    const fs::path path = parent / marked[i].second;
    fs::remove_all(path, ec);
    if (ec) return Status::FromErrno(ec.value(), "remove " + path.string());
    removed.push_back(path.string());
  }
  return removed;
}

}  // namespace sg
