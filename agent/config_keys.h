// The config keys as a table (docs/design.md §3, docs/config.md): each
// key's type and default, the sections that group nested keys, and the names
// of the enumerated choices. Internal to agent/config*.cc.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/config.h"

namespace sg::config_detail {

enum class Kind {
  kString,
  kNullableString,
  kDuration,
  kNullableDuration,
  kInt,
  kStringList,
  kNullableStringList,
  kShuffle,  // "auto" | "off" | 2 | 4
  kNullableJson,  // any JSON value (an object); from text, parsed as JSON
};

struct KeySpec {
  const char* key;
  Kind kind;
  const char* default_json;  // the default, as JSON text
};

// Every config key with its default. Nested keys are dotted.
inline constexpr KeySpec kKeys[] = {
    {"job", Kind::kString, R"("")"},
    {"store", Kind::kString, R"("file:///var/lib/spotguard/store")"},
    {"region", Kind::kNullableString, "null"},
    {"endpoint", Kind::kNullableString, "null"},
    {"checkpoint_dir", Kind::kString, R"("")"},
    {"preset", Kind::kString, R"("generic")"},
    {"patterns", Kind::kNullableStringList, "null"},
    {"command", Kind::kStringList, "[]"},
    {"resume_args", Kind::kStringList, "[]"},
    {"checkpoint_signal", Kind::kNullableString, "null"},
    {"stop_signal", Kind::kString, R"("SIGTERM")"},
    {"stop_grace", Kind::kDuration, R"("60s")"},
    {"stop_timeout", Kind::kDuration, R"("120s")"},
    {"upload_interval", Kind::kDuration, R"("5m")"},
    {"settle_time", Kind::kNullableDuration, "null"},
    {"checkpoint_interval", Kind::kNullableDuration, "null"},
    {"keep", Kind::kInt, "3"},
    {"compression.level", Kind::kInt, "1"},  // chosen by measurement: bench/RESULTS.md
    {"compression.threads", Kind::kInt, "0"},
    {"compression.shuffle", Kind::kShuffle, R"("auto")"},
    {"reuse", Kind::kString, R"("on")"},  // frame reuse (docs/design.md §4)
    {"imds.endpoint", Kind::kString, R"("http://169.254.169.254")"},
    {"imds.poll_interval", Kind::kDuration, R"("2s")"},
    {"on_rebalance", Kind::kString, R"("snapshot")"},
    {"on_complete", Kind::kString, R"("mark")"},
    {"lifecycle_hook", Kind::kNullableString, "null"},
    {"restart.max", Kind::kInt, "5"},
    {"restart.backoff", Kind::kDuration, R"("10s")"},
    {"restart.max_backoff", Kind::kDuration, R"("5m")"},
    {"lease.heartbeat", Kind::kDuration, R"("30s")"},
    {"lease.timeout", Kind::kDuration, R"("150s")"},
    {"resume.max_failures", Kind::kInt, "2"},  // agent/suspect.h
    {"complete_when", Kind::kNullableJson, "null"},
    {"checkpoint_cadence.mode", Kind::kString, R"("off")"},  // "auto": Young's interval
    {"checkpoint_cadence.min", Kind::kDuration, R"("5m")"},
    {"checkpoint_cadence.max", Kind::kDuration, R"("2h")"},
    {"checkpoint_cadence.mtbf", Kind::kDuration, R"("6h")"},
    {"fleet.max_attempts", Kind::kInt, "0"},  // 0: the engine's cap is not known
    {"metrics_file", Kind::kNullableString, "null"},  // docs/operations.md, "Metrics"
    {"prices", Kind::kStringList, "[]"},  // "TYPE=SPOT/ON_DEMAND" (agent/prices.h)
    {"log_level", Kind::kString, R"("info")"},
    {"log_format", Kind::kString, R"("text")"},
    {"log_dir", Kind::kNullableString, "null"},  // null: next to checkpoint_dir (docs/config.md)
    {"log_ship_interval", Kind::kDuration, R"("60s")"},
    {"log_max_mib", Kind::kInt, "64"},
    {"logs_keep", Kind::kInt, "10"},
    {"nodes", Kind::kInt, "1"},  // instances training the job together (docs/multi-node.md)
    {"group.port", Kind::kInt, "29500"},
    {"group.address", Kind::kNullableString, "null"},  // null: IMDS local-ipv4, else the host's
    {"group.heartbeat", Kind::kDuration, R"("10s")"},
    {"group.timeout", Kind::kDuration, R"("60s")"},
    {"group.from_single", Kind::kString, R"("refuse")"},  // docs/multi-node.md
};

inline constexpr const char* kSections[] = {"compression", "imds",   "restart",
                                            "lease",       "group",  "resume",
                                            "checkpoint_cadence",    "fleet"};

inline constexpr std::pair<std::string_view, Preset> kPresets[] = {
    {"caffe", Preset::kCaffe},           {"pytorch", Preset::kPytorch},
    {"lightning", Preset::kLightning},   {"huggingface", Preset::kHuggingface},
    {"tensorflow", Preset::kTensorflow}, {"dcp", Preset::kDcp},
    {"generic", Preset::kGeneric}};

inline constexpr std::pair<std::string_view, OnRebalance> kOnRebalance[] = {
    {"snapshot", OnRebalance::kSnapshot}, {"ignore", OnRebalance::kIgnore}};
inline constexpr std::pair<std::string_view, OnComplete> kOnComplete[] = {
    {"mark", OnComplete::kMark},
    {"scale-to-zero", OnComplete::kScaleToZero},
    {"shutdown", OnComplete::kShutdown}};
inline constexpr std::pair<std::string_view, FromSingle> kFromSingle[] = {
    {"refuse", FromSingle::kRefuse}, {"fresh", FromSingle::kFresh}};
inline constexpr std::pair<std::string_view, bool> kReuse[] = {{"on", true}, {"off", false}};
inline constexpr std::pair<std::string_view, Shuffle> kShuffleNames[] = {
    {"auto", Shuffle::kAuto}, {"off", Shuffle::kOff}, {"2", Shuffle::kTwo}, {"4", Shuffle::kFour}};

// The key's entry in kKeys; nullptr for an unknown key.
const KeySpec* FindSpec(std::string_view key);
// Whether `key` names a section ("compression") rather than a key.
bool IsSection(std::string_view key);
// The patterns a preset watches when "patterns" is not configured.
std::vector<std::string> DefaultPatterns(Preset preset);

}  // namespace sg::config_detail
