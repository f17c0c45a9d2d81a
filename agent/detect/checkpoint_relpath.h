// Paths relative to checkpoint_dir, as the listing and the preset rules use
// them: "a/b/c" strings with no leading slash, "" for checkpoint_dir itself.
// Internal to agent/detect/presets.cc and its parts.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sg::preset_detail {

// "c" for "a/b/c".
std::string_view BaseName(std::string_view path);
// "" for a path directly in checkpoint_dir.
std::string_view ParentOf(std::string_view path);
// `name` inside `dir` ("" for checkpoint_dir).
std::string JoinRel(std::string_view dir, std::string_view name);
// Whether `path` lies below `dir`; everything lies below "".
bool IsUnder(std::string_view path, std::string_view dir);
// Lexically normalizes a relative path; nullopt when it climbs out.
std::optional<std::string> NormalizeRelative(std::string_view path);

}  // namespace sg::preset_detail
