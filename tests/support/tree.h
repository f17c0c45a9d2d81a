// Directory trees for snapshot tests: write one from a map, read one back.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace sg::testing {

struct TreeFile {
  std::string content;
  unsigned mode = 0644;
  bool operator==(const TreeFile&) const = default;
};
using Tree = std::map<std::string, TreeFile>;  // relative path -> file

inline void WriteTree(const std::string& root, const Tree& tree) {
  for (const auto& [rel, f] : tree) {
    const std::filesystem::path p = std::filesystem::path(root) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << f.content;
    ::chmod(p.c_str(), f.mode);
  }
}

inline Tree ReadTree(const std::string& root) {
  Tree tree;
  if (!std::filesystem::exists(root)) return tree;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    // The agent's own files (the restore marker) are not part of a tree.
    if (e.path().filename().string().starts_with(".spotguard")) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    struct stat st {};
    ::stat(e.path().c_str(), &st);
    tree[std::filesystem::relative(e.path(), root).string()] = {ss.str(), st.st_mode & 07777u};
  }
  return tree;
}

}  // namespace sg::testing
