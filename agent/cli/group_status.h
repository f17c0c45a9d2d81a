// The group part of `status` (docs/multi-node.md, "Status"): read from the
// store's records, as JSON for `status --json` and as text.
#pragma once

#include <nlohmann/json.hpp>

#include "agent/config/config.h"
#include "common/object_store.h"
#include "common/status.h"

namespace sg {

// The group part of `status`: the round, its ranks with their freshness,
// who is missing, who waits, and the newest group snapshot.
StatusOr<nlohmann::ordered_json> GroupStatusJson(const Config& config, ObjectStore& store);
std::string GroupStatusText(const nlohmann::ordered_json& j);

}  // namespace sg
