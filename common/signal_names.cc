#include "common/signal_names.h"

#include <csignal>

#include "common/strings.h"

namespace sg {
namespace {

struct Named {
  const char* name;
  int signo;
};
constexpr Named kSignals[] = {{"SIGHUP", SIGHUP},   {"SIGINT", SIGINT},   {"SIGQUIT", SIGQUIT},
                              {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGTERM", SIGTERM},
                              {"SIGKILL", SIGKILL}, {"SIGALRM", SIGALRM}, {"SIGWINCH", SIGWINCH},
                              {"SIGCONT", SIGCONT}, {"SIGPWR", SIGPWR}};

}  // namespace

StatusOr<int> ParseSignalName(std::string_view name) {
  std::string upper = ToUpper(Trim(name));
  if (!upper.starts_with("SIG")) upper = "SIG" + upper;
  for (const Named& s : kSignals) {
    if (upper == s.name) return s.signo;
  }
  return Status::InvalidArgument("unknown signal \"" + std::string(name) +
                                 "\" (known: " + Join(KnownSignalNames(), ", ") + ")");
}

std::string SignalName(int signo) {
  for (const Named& s : kSignals) {
    if (s.signo == signo) return s.name;
  }
  return "signal " + std::to_string(signo);
}

std::vector<std::string> KnownSignalNames() {
  std::vector<std::string> out;
  for (const Named& s : kSignals) out.emplace_back(s.name);
  return out;
}

}  // namespace sg
