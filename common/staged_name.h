// The name of a FileStore write while it is staged (common/file_store.h):
// "<random>.<key>", the key with '%' and '/' percent-encoded, so that a gc
// of one prefix (one job) touches only the writes of its own keys.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sg {

// A fresh staged name for `key`. An encoded key longer than 200 bytes keeps
// its head only, marked by '+' in place of '.' (a file name stops at 255
// bytes).
std::string StagedName(const std::string& key);

// The key (or its head) a staged file is for; nullopt for a name without
// one (a writer of spotguard 0.2 or older).
std::optional<std::string> StagedKeyOf(std::string_view name);

}  // namespace sg
