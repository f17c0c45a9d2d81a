#include <map>
#include <string>
#include <vector>

#include "agent/cli.h"

extern char** environ;

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return sg::RunCli(args, env);
}
