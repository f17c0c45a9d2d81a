// Lexical operations on paths relative to checkpoint_dir.
#include "agent/detect/checkpoint_relpath.h"

#include <vector>

namespace sg::preset_detail {

std::string_view BaseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string_view ParentOf(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

std::string JoinRel(std::string_view dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  return std::string(dir) + "/" + std::string(name);
}

bool IsUnder(std::string_view path, std::string_view dir) {
  if (dir.empty()) return true;
  return path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/';
}

std::optional<std::string> NormalizeRelative(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string_view part = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part == "..") {
      if (parts.empty()) return std::nullopt;
      parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  std::string out;
  for (std::string_view p : parts) {
    if (!out.empty()) out += '/';
    out += p;
  }
  return out;
}

}  // namespace sg::preset_detail
