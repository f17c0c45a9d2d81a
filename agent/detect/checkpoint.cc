#include "agent/detect/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <tuple>

namespace sg {

void SortNewestFirst(std::vector<Checkpoint>& checkpoints) {
  // The stepped checkpoints by time, to give each stepless one the highest
  // step written no later than it.
  std::vector<std::pair<std::chrono::system_clock::time_point, int64_t>> stepped;
  for (const Checkpoint& c : checkpoints) {
    if (c.step) stepped.emplace_back(c.newest_mtime, *c.step);
  }
  std::sort(stepped.begin(), stepped.end());
  for (size_t i = 1; i < stepped.size(); ++i) {
    stepped[i].second = std::max(stepped[i].second, stepped[i - 1].second);
  }
  auto rank_step = [&](const Checkpoint& c) -> int64_t {
    if (c.step) return *c.step;
    auto it = std::upper_bound(stepped.begin(), stepped.end(), c.newest_mtime,
                               [](const auto& t, const auto& entry) { return t < entry.first; });
    return it == stepped.begin() ? -1 : std::prev(it)->second;
  };
  std::vector<std::pair<int64_t, Checkpoint*>> keyed;
  keyed.reserve(checkpoints.size());
  for (Checkpoint& c : checkpoints) keyed.emplace_back(rank_step(c), &c);
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first, a.second->newest_mtime, a.second->id) >
           std::tie(b.first, b.second->newest_mtime, b.second->id);
  });
  std::vector<Checkpoint> sorted;
  sorted.reserve(checkpoints.size());
  for (auto& [key, c] : keyed) sorted.push_back(std::move(*c));
  checkpoints = std::move(sorted);
}

bool IsNewerThan(const Checkpoint& c, const CheckpointMark& mark) {
  if (c.step && mark.step) return *c.step > *mark.step;
  return c.newest_mtime > mark.newest_mtime;
}

std::optional<Checkpoint> FirstNewerThan(const std::vector<Checkpoint>& newest_first,
                                         const std::optional<CheckpointMark>& mark) {
  for (const Checkpoint& c : newest_first) {
    if (!mark || IsNewerThan(c, *mark)) return c;
  }
  return std::nullopt;
}

bool IsAgentPrivatePath(std::string_view relpath) {
  size_t start = 0;
  while (start <= relpath.size()) {
    size_t slash = relpath.find('/', start);
    std::string_view component = relpath.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (component.starts_with(".spotguard")) return true;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return false;
}

uint64_t CheckpointBytes(const std::string& checkpoint_dir, const Checkpoint& c) {
  uint64_t bytes = 0;
  for (const std::string& rel : c.relpaths) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(checkpoint_dir + "/" + rel, ec);
    if (!ec) bytes += size;
  }
  return bytes;
}

}  // namespace sg
