// The config keys of the job's policies (docs/config.md): resume.*,
// complete_when, checkpoint_cadence.* and fleet.*, and the ledger's
// metrics_file and prices, read and printed apart from the rest of the
// config. Internal to agent/config*.cc.
#pragma once

#include <nlohmann/json.hpp>

#include "agent/config.h"
#include "agent/config_values.h"

namespace sg {
namespace config_detail {

// Reads the policy keys of `values` into `c`, adding a problem per bad value.
void ReadPolicyKeys(const SourcedValues& values, Config& c, Problems& p);

}  // namespace config_detail

// Adds the policy keys to ConfigToJson's object.
void AddPolicyKeys(const Config& c, nlohmann::ordered_json& j);

}  // namespace sg
