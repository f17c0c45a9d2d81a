// The config table (docs/design.md §3, docs/config.md): one row per key with
// its default, how it is read into Config and how --print-config writes it,
// in the order --print-config writes them; its lookups; each preset's
// default patterns; and the public names derived from the table
// (ConfigKeys, EnvVarForKey, PresetName).
#include "agent/config/config_keys.h"

#include <algorithm>

#include "agent/config/config_policies.h"
#include "agent/config/config_rows.h"
#include "common/signal_names.h"
#include "common/strings.h"

namespace sg {
namespace config_detail {
namespace {

constexpr KeyRow kRows[] = {
    CustomReadRow(
        "job", R"("")", Kind::kString, ReadJob, [](auto& c) -> auto& { return c.job; },
        R"("sample-job")"),
    Redacted(CustomReadRow(
        "store", R"("file:///var/lib/spotguard/store")", Kind::kString, ReadStore,
        [](auto& c) -> auto& { return c.store; }, R"("s3://sample-bucket/prefix")")),
    StringRow(
        "region", [](auto& c) -> auto& { return c.region; }, R"("eu-west-1")"),
    Redacted(StringRow(
        "endpoint", [](auto& c) -> auto& { return c.endpoint; }, R"("https://minio.internal:9000")",
        CheckHttpUrl)),
    CustomReadRow(
        "checkpoint_dir", R"("")", Kind::kString, ReadCheckpointDir,
        [](auto& c) -> auto& { return c.checkpoint_dir; }, R"("/data/ckpt")"),
    ChoiceRow<kPresets>(
        "preset", R"("generic")", [](auto& c) -> auto& { return c.preset; }, R"("pytorch")"),
    // null: the preset's own patterns (DefaultPatterns).
    CommaList(CustomReadRow(
        "patterns", "null", Kind::kNullableStringList, ReadPatterns,
        [](auto& c) -> auto& { return c.patterns; }, R"(["*.pt"])")),
    Redacted(ListRow(
        "command", "[]", [](auto& c) -> auto& { return c.command; }, R"(["python3", "train.py"])",
        CheckPlaceholders)),
    Redacted(ListRow(
        "resume_args", "[]", [](auto& c) -> auto& { return c.resume_args; },
        R"(["--resume", "{resume}"])", CheckPlaceholders)),
    // null: SIGHUP for caffe, else none.
    CustomRow("checkpoint_signal", "null", Kind::kNullableString, ReadCheckpointSignal,
              WriteCheckpointSignal, R"("SIGUSR2")"),
    ParsedRow<ParseSignalName, SignalName>(
        "stop_signal", R"("SIGTERM")", [](auto& c) -> auto& { return c.stop_signal; },
        R"("SIGINT")"),
    DurationRow(
        "stop_grace", R"("60s")", [](auto& c) -> auto& { return c.stop_grace; },
        /*zero_ok=*/true, R"("30s")"),
    DurationRow(
        "stop_timeout", R"("120s")", [](auto& c) -> auto& { return c.stop_timeout; }, false,
        R"("90s")"),
    DurationRow(
        "upload_interval", R"("5m")", [](auto& c) -> auto& { return c.upload_interval; }, false,
        R"("10m")"),
    // null: the preset's settle time.
    DurationRow(
        "settle_time", "null", [](auto& c) -> auto& { return c.settle_time; }, true, R"("5s")"),
    DurationRow(
        "checkpoint_interval", "null", [](auto& c) -> auto& { return c.checkpoint_interval; },
        false, R"("30m")"),
    IntRow(
        "keep", "3", [](auto& c) -> auto& { return c.keep; }, 1, 10000, "4"),
    // Backups of checkpoint_dir (docs/design.md §7, "Backups of the checkpoint dir").
    IntRow(
        "backups_keep", "2", [](auto& c) -> auto& { return c.backups_keep; }, 0, 10000, "3"),
    // Level 1 chosen by measurement: bench/RESULTS.md.
    IntRow(
        "compression.level", "1", [](auto& c) -> auto& { return c.compression.level; }, 1, 19, "3"),
    IntRow(
        "compression.threads", "0", [](auto& c) -> auto& { return c.compression.threads; }, 0, 1024,
        "2"),
    CustomRow("compression.shuffle", R"("auto")", Kind::kShuffle, ReadShuffle, WriteShuffle, "4"),
    // Frame reuse (docs/design.md §4).
    ChoiceRow<kReuse>(
        "reuse", R"("on")", [](auto& c) -> auto& { return c.reuse; }, R"("off")"),
    Redacted(CustomReadRow(
        "imds.endpoint", R"("http://169.254.169.254")", Kind::kString, ReadImdsEndpoint,
        [](auto& c) -> auto& { return c.imds.endpoint; }, R"("http://127.0.0.1:1338")")),
    DurationRow(
        "imds.poll_interval", R"("2s")", [](auto& c) -> auto& { return c.imds.poll_interval; },
        false, R"("5s")"),
    ChoiceRow<kOnRebalance>(
        "on_rebalance", R"("snapshot")", [](auto& c) -> auto& { return c.on_rebalance; },
        R"("ignore")"),
    ChoiceRow<kOnComplete>(
        "on_complete", R"("mark")", [](auto& c) -> auto& { return c.on_complete; },
        R"("shutdown")"),
    StringRow(
        "lifecycle_hook", [](auto& c) -> auto& { return c.lifecycle_hook; }, R"("sample-hook")"),
    IntRow(
        "restart.max", "5", [](auto& c) -> auto& { return c.restart.max; }, 0, 1000000, "7"),
    DurationRow(
        "restart.backoff", R"("10s")", [](auto& c) -> auto& { return c.restart.backoff; }, false,
        R"("20s")"),
    DurationRow(
        "restart.max_backoff", R"("5m")", [](auto& c) -> auto& { return c.restart.max_backoff; },
        false, R"("10m")"),
    DurationRow(
        "lease.heartbeat", R"("30s")", [](auto& c) -> auto& { return c.lease.heartbeat; }, false,
        R"("20s")"),
    DurationRow(
        "lease.timeout", R"("150s")", [](auto& c) -> auto& { return c.lease.timeout; }, false,
        R"("100s")"),
    // Failed runs that make a snapshot suspect (agent/run/suspect.h).
    IntRow(
        "resume.max_failures", "2", [](auto& c) -> auto& { return c.resume.max_failures; }, 1, 1000,
        "3", "must be 1 to 1000"),
    CustomRow("complete_when", "null", Kind::kNullableJson, ReadCompleteWhen, WriteCompleteWhen,
              R"({"step_at_least": 100})"),
    // "auto": Young's interval (agent/run/checkpoint_cadence.h).
    ChoiceRow<kCadenceModes>(
        "checkpoint_cadence.mode", R"("off")",
        [](auto& c) -> auto& { return c.checkpoint_cadence.automatic; }, R"("auto")"),
    DurationRow(
        "checkpoint_cadence.min", R"("5m")",
        [](auto& c) -> auto& { return c.checkpoint_cadence.min; }, false, R"("10m")"),
    DurationRow(
        "checkpoint_cadence.max", R"("2h")",
        [](auto& c) -> auto& { return c.checkpoint_cadence.max; }, false, R"("3h")"),
    DurationRow(
        "checkpoint_cadence.mtbf", R"("6h")",
        [](auto& c) -> auto& { return c.checkpoint_cadence.mtbf; }, false, R"("12h")"),
    // 0: the engine's cap is not known.
    IntRow(
        "fleet.max_attempts", "0", [](auto& c) -> auto& { return c.fleet_max_attempts; }, 0, 1000,
        "3", "must be 0 (unknown) to 1000"),
    // The ledger (docs/operations.md, "Metrics").
    PathRow(
        "metrics_file", [](auto& c) -> auto& { return c.metrics_file; }, "use null for none",
        /*trim_slash=*/false, R"("/var/lib/sample/spotguard.prom")"),
    // "TYPE=SPOT/ON_DEMAND" (agent/config/prices.h).
    CommaList(ListRow(
        "prices", "[]", [](auto& c) -> auto& { return c.prices; }, R"(["g5.xlarge=0.45/1.006"])",
        CheckPrices)),
    // Instances training the job together (docs/multi-node.md).
    IntRow(
        "nodes", "1", [](auto& c) -> auto& { return c.nodes; }, 1, 1024, "2"),
    IntRow(
        "group.port", "29500", [](auto& c) -> auto& { return c.group.port; }, 1, 65535, "29501"),
    // null: IMDS local-ipv4, else the host's.
    StringRow(
        "group.address", [](auto& c) -> auto& { return c.group.address; }, R"("10.0.0.2")",
        CheckHostName),
    DurationRow(
        "group.heartbeat", R"("10s")", [](auto& c) -> auto& { return c.group.heartbeat; }, false,
        R"("20s")"),
    DurationRow(
        "group.timeout", R"("60s")", [](auto& c) -> auto& { return c.group.timeout; }, false,
        R"("90s")"),
    ChoiceRow<kFromSingle>(
        "group.from_single", R"("refuse")", [](auto& c) -> auto& { return c.group.from_single; },
        R"("fresh")"),
    ParsedRow<ParseLogLevel, LogLevelName>(
        "log_level", R"("info")", [](auto& c) -> auto& { return c.log_level; }, R"("debug")"),
    ParsedRow<ParseLogFormat, LogFormatName>(
        "log_format", R"("text")", [](auto& c) -> auto& { return c.log_format; }, R"("json")"),
    // null: next to checkpoint_dir (docs/config.md, docs/design.md §13).
    PathRow(
        "log_dir", [](auto& c) -> auto& { return c.log_dir; }, "use null for the default",
        /*trim_slash=*/true, R"("/var/log/sample")"),
    DurationRow(
        "log_ship_interval", R"("60s")", [](auto& c) -> auto& { return c.log_ship_interval; },
        false, R"("30s")"),
    IntRow(
        "log_max_mib", "64", [](auto& c) -> auto& { return c.log_max_mib; }, 2, 1000000, "32"),
    IntRow(
        "logs_keep", "10", [](auto& c) -> auto& { return c.logs_keep; }, 1, 10000, "5"),
};

// Function pointers are not compared here: GCC's sanitized builds do not
// take a function's address as a constant. A row without its reader or
// writer fails ConfigTest.EveryKeyOfTheTableIsReadAndPrinted instead.
constexpr bool EveryRowIsWhole() {
  for (const KeyRow& row : kRows) {
    if (row.sample == nullptr) return false;
    for (const KeyRow& other : kRows) {
      if (&other != &row && std::string_view(other.key) == row.key) return false;
    }
  }
  return true;
}
static_assert(EveryRowIsWhole(), "every key once, each with a sample");

}  // namespace

std::span<const KeyRow> Rows() { return kRows; }

const KeyRow* FindRow(std::string_view key) {
  for (const KeyRow& row : kRows) {
    if (key == row.key) return &row;
  }
  return nullptr;
}

bool IsSection(std::string_view key) {
  return std::any_of(std::begin(kRows), std::end(kRows), [&](const KeyRow& row) {
    const std::string_view k = row.key;
    return k.size() > key.size() && k.starts_with(key) && k[key.size()] == '.';
  });
}

std::vector<std::string> Sections() {
  std::vector<std::string> out;
  for (const KeyRow& row : kRows) {
    const std::string_view k = row.key;
    const size_t dot = k.find('.');
    if (dot == std::string_view::npos) continue;
    std::string section(k.substr(0, dot));
    if (std::find(out.begin(), out.end(), section) == out.end()) out.push_back(std::move(section));
  }
  return out;
}

std::vector<std::string> DefaultPatterns(Preset preset) {
  switch (preset) {
    case Preset::kCaffe:
      return {"*.caffemodel", "*.solverstate", "*.caffemodel.h5", "*.solverstate.h5"};
    case Preset::kPytorch:
      return {"*.pt", "*.pth", "*.bin", "*.safetensors"};
    case Preset::kLightning:
      return {"*.ckpt"};
    case Preset::kHuggingface:
      return {"checkpoint-*"};
    case Preset::kTensorflow:
      return {"checkpoint", "*.index", "*.data-*"};
    case Preset::kDcp:
      return {"*"};
    case Preset::kGeneric:
      return {"*"};
  }
  return {"*"};
}

}  // namespace config_detail

std::vector<std::string> ConfigKeys() {
  std::vector<std::string> out;
  for (const config_detail::KeyRow& row : config_detail::Rows()) out.emplace_back(row.key);
  return out;
}

std::string EnvVarForKey(const std::string& key) {
  std::string name = "SPOTGUARD_" + ToUpper(key);
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

std::string_view PresetName(Preset p) {
  for (const auto& [name, value] : config_detail::kPresets) {
    if (value == p) return name;
  }
  return "generic";
}

}  // namespace sg
