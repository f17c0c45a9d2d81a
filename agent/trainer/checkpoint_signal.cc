#include "agent/trainer/checkpoint_signal.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <string_view>

namespace sg {
namespace {

constexpr std::array<std::string_view, 2> kLauncherModules = {"torch.distributed.run",
                                                              "torch.distributed.launch"};

bool IsLauncherModule(std::string_view module) {
  return std::find(kLauncherModules.begin(), kLauncherModules.end(), module) !=
         kLauncherModules.end();
}

}  // namespace

SignalTarget CheckpointSignalTarget(const std::vector<std::string>& command) {
  if (command.empty()) return SignalTarget::kTrainer;
  const std::string program = std::filesystem::path(command.front()).filename().string();
  if (program == "torchrun") return SignalTarget::kWorkers;
  if (!program.starts_with("python")) return SignalTarget::kTrainer;
  // The interpreter's options come before the module: `python3 -u -m torch.distributed.run`.
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string& arg = command[i];
    if (arg == "-m") return i + 1 < command.size() && IsLauncherModule(command[i + 1])
                                ? SignalTarget::kWorkers
                                : SignalTarget::kTrainer;
    if (arg.starts_with("-m")) {
      return IsLauncherModule(std::string_view(arg).substr(2)) ? SignalTarget::kWorkers
                                                               : SignalTarget::kTrainer;
    }
    if (!arg.starts_with("-")) break;  // a script: no module runs
  }
  return SignalTarget::kTrainer;
}

Status SendCheckpointSignal(Trainer& trainer, int signo, SignalTarget target) {
  return target == SignalTarget::kWorkers ? trainer.SignalWorkers(signo) : trainer.Signal(signo);
}

}  // namespace sg
