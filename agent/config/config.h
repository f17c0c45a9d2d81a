// The job's configuration (docs/design.md §3): read from a JSON file with comments,
// SPOTGUARD_<KEY> environment variables and command-line flags, in that order
// of increasing precedence over the built-in defaults, then validated as a
// whole so that every problem is reported at once.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/duration.h"
#include "common/log.h"

namespace sg {

enum class Preset { kCaffe, kPytorch, kLightning, kHuggingface, kTensorflow, kDcp, kGeneric };
enum class Shuffle { kAuto, kOff, kTwo, kFour };
enum class OnRebalance { kSnapshot, kIgnore };
enum class OnComplete { kMark, kScaleToZero, kShutdown };
// What a job of several nodes does when the store holds single-node
// snapshots of it and no group snapshot (docs/multi-node.md).
enum class FromSingle { kRefuse, kFresh };

// What a trainer's exit 0 must have achieved to complete the job
// (`complete_when`, docs/config.md); each condition that is set must hold.
struct CompleteWhen {
  std::optional<int64_t> step_at_least;    // the newest checkpoint's step
  std::optional<std::string> file_exists;  // relative to checkpoint_dir
};

struct Config {
  std::string job;  // with {index} replaced (agent/config/engine_identity.h)
  // From the engine's environment (agent/config/engine_identity.h): the child's
  // index in an array or indexed job, and AWS Batch's attempt number.
  std::optional<int64_t> index;
  std::optional<int64_t> engine_attempt;
  std::string store;  // validated URL, see common/store_url.h
  std::optional<std::string> region;
  std::optional<std::string> endpoint;
  std::string checkpoint_dir;  // absolute
  Preset preset = Preset::kGeneric;
  std::vector<std::string> patterns;  // the preset's own when not configured
  std::vector<std::string> command;
  std::vector<std::string> resume_args;
  std::optional<int> checkpoint_signal;  // nullopt: the trainer cannot be asked
  int stop_signal = 0;
  Duration stop_grace{};
  Duration stop_timeout{};  // from SIGTERM to the kill that follows it
  Duration upload_interval{};
  // How long a checkpoint file must stay unchanged after its last write
  // before it counts as complete; nullopt: the preset's default.
  std::optional<Duration> settle_time;
  std::optional<Duration> checkpoint_interval;
  int keep = 0;
  // Backups of checkpoint_dir that the agent's restores made and keeps
  // whatever they hold (agent/repo/round_backups.h).
  int backups_keep = 0;
  struct {
    int level = 0;
    int threads = 0;  // 0: all cores
    Shuffle shuffle = Shuffle::kAuto;
  } compression;
  // Reference frames already stored for the job instead of uploading them
  // again (`reuse`: "on" | "off"; docs/design.md §4).
  bool reuse = true;
  struct {
    std::string endpoint;
    Duration poll_interval{};
  } imds;
  OnRebalance on_rebalance = OnRebalance::kSnapshot;
  OnComplete on_complete = OnComplete::kMark;
  std::optional<std::string> lifecycle_hook;
  struct {
    int max = 0;
    Duration backoff{};
    Duration max_backoff{};
  } restart;
  struct {
    Duration heartbeat{};
    Duration timeout{};
  } lease;
  // Failed runs from one snapshot, with no newer checkpoint, that make it
  // suspect (agent/run/suspect.h).
  struct {
    int max_failures = 2;
  } resume;
  std::optional<CompleteWhen> complete_when;  // nullopt: any exit 0 completes
  // Checkpoint requests at Young's interval (agent/run/checkpoint_cadence.h);
  // `automatic` false: only checkpoint_interval, if set.
  struct Cadence {
    bool automatic = false;
    Duration min{};
    Duration max{};
    Duration mtbf{};  // the prior mean time between interruptions
  } checkpoint_cadence;
  // The engine's cap on a job's attempts (fleet.max_attempts; 0: unknown),
  // for `status`'s warning (agent/run/retry_budget.h).
  int fleet_max_attempts = 0;
  // The ledger (docs/operations.md): where the agent writes its Prometheus
  // metrics (absolute; "" = nowhere), and the instance prices `report`
  // uses, "TYPE=SPOT/ON_DEMAND" USD per hour (agent/config/prices.h).
  std::string metrics_file;
  std::vector<std::string> prices;
  // A job trained by several instances together (docs/multi-node.md); 1 is a
  // job of one instance.
  int nodes = 1;
  struct {
    int port = 0;                        // the rendezvous port of rank 0 (MASTER_PORT)
    std::optional<std::string> address;  // how peers reach this node; nullopt: found out
    Duration heartbeat{};                // a member's record is rewritten this often
    Duration timeout{};                  // unchanged this long: the member is gone
    FromSingle from_single = FromSingle::kRefuse;  // a job that ran on one node before
  } group;
  LogLevel log_level = LogLevel::kInfo;
  LogFormat log_format = LogFormat::kText;
  // The captured logs (docs/design.md §13). log_dir: absolute; empty until
  // resolved (LogDirOf in agent/logs/log_capture.h picks the default).
  std::string log_dir;
  Duration log_ship_interval{};
  int log_max_mib = 0;  // the local files' bound
  int logs_keep = 0;    // attempts whose shipped logs retention keeps
};

// Everything a config is made from. Keys in `flags` are config keys
// ("job", "imds.endpoint"); `env` is the process environment.
struct ConfigSources {
  std::optional<std::string> file;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> flags;
  std::vector<std::string> command_args;  // after "--"; replaces "command" when non-empty
};

// What the subcommand at hand cannot do without.
struct ConfigNeeds {
  bool job = false;
  bool checkpoint_dir = false;
  bool command = false;
};

struct ConfigProblem {
  std::string key;
  std::string message;  // "<key>: <what is wrong> (<where it came from>)"
};

struct ConfigResult {
  Config config;  // meaningful only when problems is empty
  std::vector<ConfigProblem> problems;
  bool ok() const { return problems.empty(); }
};

ConfigResult LoadConfig(const ConfigSources& sources, const ConfigNeeds& needs);

// The effective config as a config file would hold it. With `redact`,
// credentials in URLs and arguments that look like secrets are replaced.
nlohmann::ordered_json ConfigToJson(const Config& config, bool redact);

// `args` with what looks like a secret replaced by "<redacted>" (the value
// of --api-key=..., the argument after --password, user:password@ in a
// URL): what --print-config shows, and what may be stored or logged.
std::vector<std::string> RedactArgs(const std::vector<std::string>& args);

// All known keys, dotted for nested ones ("compression.level").
std::vector<std::string> ConfigKeys();
// "SPOTGUARD_COMPRESSION_LEVEL" for "compression.level".
std::string EnvVarForKey(const std::string& key);

std::string_view PresetName(Preset p);

}  // namespace sg
