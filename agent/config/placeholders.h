// Placeholders in `command` and `resume_args` (docs/config.md): "{name}" is
// replaced by a value, "{{" and "}}" stand for a literal brace, so that
// Lightning's `filename={{epoch}}-{{step}}` reaches the trainer as
// `filename={epoch}-{step}`. One scanner for the config check and the
// expansion, so both read an argument the same way.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace sg {

// Copies `arg` with "{{" -> "{", "}}" -> "}" and each "{name}" (name of
// [a-z_]+) replaced by value(name); a name value() gives nullopt for stays
// as written. Any other brace is copied as it is.
std::string ExpandPlaceholders(
    std::string_view arg,
    const std::function<std::optional<std::string>(std::string_view name)>& value);

}  // namespace sg
