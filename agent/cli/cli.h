// The command line (docs/design.md §2): parses argv, builds the config and runs the
// subcommand. Returns the process exit code.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace sg {

// `env` is the process environment as a map (tests pass their own).
int RunCli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env);

}  // namespace sg
