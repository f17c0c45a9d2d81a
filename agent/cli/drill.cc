#include "agent/cli/drill.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "agent/run/daemon.h"
#include "agent/config/exit_codes.h"
#include "agent/repo/open_store.h"
#include "common/files.h"
#include "common/log.h"
#include "common/sd_notify.h"

namespace sg {
namespace {

// The metadata service of a spot instance that gets reclaimed `after` from
// its start, with the usual two minutes' notice.
class DrillMetadata final : public MetadataService {
 public:
  DrillMetadata(Clock& clock, Duration after) : clock_(clock), notice_at_(clock.Now() + after) {}

  StatusOr<std::string> Get(std::string_view path) override {
    if (path == "meta-data/spot/instance-action" && clock_.Now() >= notice_at_) {
      const auto deadline = notice_at_ + std::chrono::seconds(120);
      return nlohmann::json{{"action", "terminate"}, {"time", FormatUtc(deadline)}}.dump();
    }
    if (path == "meta-data/events/maintenance/scheduled") return std::string("[]");
    return Status::NotFound("no " + std::string(path) + " in a drill");
  }

 private:
  Clock& clock_;
  const Clock::WallTime notice_at_;
};

std::string DrillStepText(const std::optional<int64_t>& step) {
  return step ? std::to_string(*step) : "unknown";
}

}  // namespace

int RunDrillCommand(const Config& config, const std::map<std::string, std::string>& env,
                    const DrillOptions& options) {
  char templ[] = "/tmp/spotguard-drill-XXXXXX";
  if (::mkdtemp(templ) == nullptr) {
    std::cerr << "spotguard drill: cannot create a temporary directory\n";
    return kExitFailure;
  }
  const std::string work = templ;
  Config first = config;
  if (first.job.empty()) first.job = "drill";
  if (!options.use_configured_store) first.store = "file://" + work + "/store";
  first.checkpoint_dir = work + "/instance-1/ckpt";
  Config second = first;
  second.checkpoint_dir = work + "/instance-2/ckpt";
  std::filesystem::create_directories(first.checkpoint_dir);

  auto store = OpenStore(first, env);
  if (!store.ok()) {
    std::cerr << "spotguard drill: " << store.status().message() << "\n";
    return kExitFailure;
  }
  const std::map<std::string, std::string> no_systemd;  // the drill is not the service
  SystemdNotifier notifier(no_systemd);
  std::cerr << "spotguard drill: job " << first.job << ", store " << first.store
            << ", interruption after " << FormatDuration(options.after) << "\n";

  DrillMetadata imds1(SystemClock(), options.after);
  AgentContext one{first, env, **store, SystemClock(), &imds1, notifier, "drill-instance-1"};
  const AgentResult r1 = RunAgent(one);
  if (r1.exit_code != kExitInterrupted) {
    std::cerr << "spotguard drill: the first instance ended with exit " << r1.exit_code
              << " instead of being interrupted (did the job finish before the notice? "
                 "try a smaller --after)\n";
    return r1.exit_code == kExitOk ? kExitFailure : r1.exit_code;
  }

  DrillMetadata imds2(SystemClock(), options.after);
  AgentContext two{second, env, **store, SystemClock(), &imds2, notifier, "drill-instance-2"};
  const AgentResult r2 = RunAgent(two);
  const bool resumed = r2.exit_code == kExitInterrupted || r2.exit_code == kExitOk;

  std::optional<int64_t> lost;
  if (r1.local_step && r2.resumed_step) lost = *r1.local_step - *r2.resumed_step;
  std::printf("\nspotguard drill report (job %s)\n", first.job.c_str());
  std::printf("  steps done before the interruption   %s\n", DrillStepText(r1.local_step).c_str());
  std::printf("  step committed after the notice      %s\n",
              DrillStepText(r1.committed_step).c_str());
  std::printf("  notice to commit                     %.1f s\n", r1.notice_to_commit_seconds);
  std::printf("  replacement restored in              %.1f s\n", r2.restore_seconds);
  std::printf("  replacement resumed from step        %s\n",
              DrillStepText(r2.resumed_step).c_str());
  std::printf("  steps lost                           %s\n",
              lost ? std::to_string(*lost).c_str() : "unknown");
  std::printf("  replacement ended with               exit %d (%s)\n", r2.exit_code,
              r2.exit_code == kExitOk            ? "job complete"
              : r2.exit_code == kExitInterrupted ? "interrupted again, as planned"
                                                 : "failure");
  std::printf("  result                               %s\n",
              resumed ? "SURVIVED: the job continued on the replacement" : "FAILED");
  std::filesystem::remove_all(work);
  return resumed ? kExitOk : kExitFailure;
}

}  // namespace sg
