// `spotguard watch` (agent/cli/watch_command.h): the interruption monitor on its
// own, printing what the metadata service says and running a hook on it.
#include "agent/cli/watch_command.h"

#include <signal.h>

#include <atomic>
#include <iostream>
#include <vector>

#include "agent/config/exit_codes.h"
#include "agent/run/interruption_monitor.h"
#include "agent/repo/open_store.h"
#include "common/clock.h"
#include "common/imds_client.h"
#include "common/log.h"
#include "common/process.h"

namespace sg {
namespace {

std::atomic<bool> g_stop_requested{false};

void OnStopSignal(int) { g_stop_requested.store(true); }

// SIGINT and SIGTERM only set a flag; the poll loop sees it within 100 ms.
// The previous handlers come back when this goes out of scope.
class StopSignals {
 public:
  StopSignals() {
    g_stop_requested.store(false);
    struct sigaction sa = {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ = {}, old_term_ = {};
};

// Runs the user's --exec line once per event, each as soon as its event is
// seen (hooks may overlap), and logs how each one ended.
class HookRunner {
 public:
  HookRunner(std::string command, std::map<std::string, std::string> env)
      : command_(std::move(command)), env_(std::move(env)) {}

  void Start(const InterruptionEvent& event, const std::string& event_json) {
    SpawnOptions spawn;
    spawn.argv = {"/bin/sh", "-c", command_};
    spawn.env = env_;
    spawn.env["SPOTGUARD_EVENT"] = event_json;
    spawn.stdin_data = event_json + "\n";
    spawn.stdout_fd = 2;  // stdout carries only events
    auto child = ChildProcess::Spawn(spawn);
    if (!child.ok()) {
      LogError("--exec for the {} event could not start: {}", InterruptionKindName(event.kind),
               child.status().message());
      return;
    }
    LogInfo("--exec started for the {} event (pid {})", InterruptionKindName(event.kind),
            child->pid());
    running_.push_back({std::move(*child), std::string(InterruptionKindName(event.kind)),
                        SystemClock().Monotonic()});
  }

  // Logs the hooks that have ended, without waiting.
  void Reap() { WaitFor(std::chrono::milliseconds(0)); }

  // Waits for every running hook; after `limit` the rest are stopped (SIGTERM,
  // then SIGKILL after 5 s). nullopt: no limit.
  void WaitAll(std::optional<std::chrono::milliseconds> limit) {
    const auto deadline = limit ? SystemClock().Monotonic() + *limit : Clock::MonoTime::max();
    while (!running_.empty()) {
      const auto now = SystemClock().Monotonic();
      if (now >= deadline) break;
      WaitFor(std::min<std::chrono::milliseconds>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now),
          std::chrono::milliseconds(100)));
    }
    for (Running& r : running_) {
      LogWarn("--exec for the {} event still runs; stopping it", r.kind);
      auto ended = r.child.Stop(std::chrono::seconds(5));
      if (ended.ok()) Report(r, *ended);
    }
    running_.clear();
  }

 private:
  struct Running {
    ChildProcess child;
    std::string kind;
    Clock::MonoTime started;
  };

  void WaitFor(std::chrono::milliseconds timeout) {
    for (auto it = running_.begin(); it != running_.end();) {
      auto ended = it->child.Wait(it == running_.begin() ? timeout : std::chrono::milliseconds(0));
      if (!ended.ok() || ended->has_value()) {
        if (ended.ok()) {
          Report(*it, **ended);
        } else {
          LogError("--exec for the {} event: {}", it->kind, ended.status().message());
        }
        it = running_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void Report(const Running& r, const ExitStatus& status) {
    const double seconds =
        std::chrono::duration<double>(SystemClock().Monotonic() - r.started).count();
    if (status.success()) {
      LogInfo("--exec for the {} event ended: {} after {:.2f} s", r.kind, status.ToString(),
              seconds);
    } else {
      LogWarn("--exec for the {} event failed: {} after {:.2f} s", r.kind, status.ToString(),
              seconds);
    }
  }

  const std::string command_;
  const std::map<std::string, std::string> env_;
  std::vector<Running> running_;
};

}  // namespace

int RunWatch(const Config& config, const WatchOptions& options,
             const std::map<std::string, std::string>& env) {
  // The command's one set of AWS parts (docs/design.md §12): its metadata
  // client takes the configured endpoint, or the AWS variable when the
  // config holds the default one.
  const std::shared_ptr<AwsEnvironment> aws = OpenAws(config, env);
  ImdsClient* client = aws->imds();
  if (client == nullptr) {
    std::cerr << "spotguard watch: the instance metadata service is disabled "
                 "(AWS_EC2_METADATA_DISABLED=true); there is nothing to watch\n";
    return kExitFailure;
  }
  ImdsClient& imds = *client;
  const ImdsClient::Options& imds_options = imds.options();

  auto identity = ReadInstanceIdentity(imds);
  if (!identity.ok()) {
    if (identity.status().reason() == kImdsNoAnswer) {
      std::cerr << "spotguard watch: no instance metadata service answers at "
                << imds_options.endpoint << ", so this is not an EC2 instance (or IMDS is "
                << "turned off for it); set --imds-endpoint to watch another endpoint\n  "
                << identity.status().message() << "\n";
    } else {
      std::cerr << "spotguard watch: the instance metadata service at " << imds_options.endpoint
                << " did not give the instance identity: " << identity.status().message() << "\n";
    }
    return kExitFailure;
  }
  LogInfo("watching {} ({}, {}, {}) through {}: polling every {}", identity->instance_id,
          identity->instance_type,
          identity->life_cycle.empty() ? "unknown life cycle" : identity->life_cycle,
          identity->availability_zone, imds_options.endpoint,
          FormatDuration(config.imds.poll_interval));
  if (!identity->life_cycle.empty() && identity->life_cycle != "spot") {
    LogInfo(
        "instance-life-cycle is \"{}\": no spot notice will come; rebalance, Auto Scaling "
        "and scheduled events are still watched",
        identity->life_cycle);
  }

  InterruptionMonitor::Options monitor_options;
  monitor_options.poll_interval = config.imds.poll_interval;
  InterruptionMonitor monitor(imds, SystemClock(), monitor_options);
  HookRunner hooks(options.exec, env);
  StopSignals signals;

  bool noticed = false;
  monitor.Run(
      [&](std::vector<InterruptionEvent>& events) {
        for (const InterruptionEvent& e : events) {
          auto j = e.ToJson();
          j["instance_id"] = identity->instance_id;
          const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
          if (options.json) {
            std::cout << line << '\n' << std::flush;
          } else {
            std::cout << FormatUtc(e.observed, /*millis=*/true) << " " << e.Describe() << '\n'
                      << std::flush;
          }
          if (!options.exec.empty()) hooks.Start(e, line);
          noticed = noticed || e.IsNotice();
        }
        hooks.Reap();
        return !(options.once && noticed);
      },
      g_stop_requested);

  if (noticed && options.once) {
    hooks.WaitAll(std::nullopt);  // the hook is what a user-data script waits for
  } else {
    LogInfo("stopping on a signal");
    hooks.WaitAll(std::chrono::seconds(10));
  }
  return kExitOk;
}

}  // namespace sg
