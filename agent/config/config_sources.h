// Where config values come from (docs/design.md §3): the defaults, then the
// JSON file with comments, then SPOTGUARD_<KEY> variables, then flags and the
// command after "--", each overriding the one before. Internal to
// agent/config*.cc.
#pragma once

#include "agent/config/config.h"
#include "agent/config/config_values.h"

namespace sg::config_detail {

// Every key's value from the highest-precedence source that sets it. A value
// that cannot be read (a file that is not JSON, an unknown key, a list that
// is not a JSON array) is left at the lower source's and adds a problem.
SourcedValues GatherValues(const ConfigSources& sources, Problems& problems);

}  // namespace sg::config_detail
