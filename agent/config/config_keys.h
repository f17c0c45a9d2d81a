// The config keys as one table (docs/design.md §3, docs/config.md): each row
// names a key, its default, how its value is read and checked into Config and
// how --print-config writes it back, plus the names of the enumerated
// choices. The rows themselves are in agent/config/config_keys.cc, built with the
// helpers of agent/config/config_rows.h. Internal to agent/config*.cc.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/config/config.h"
#include "agent/config/config_values.h"

namespace sg::config_detail {

// How a value given as text (a SPOTGUARD_<KEY> variable, a flag) becomes the
// JSON a config file would hold.
enum class Kind {
  kString,
  kNullableString,
  kDuration,
  kNullableDuration,
  kInt,
  kStringList,
  kNullableStringList,
  kShuffle,       // "auto" | "off" | 2 | 4
  kNullableJson,  // any JSON value (an object); from text, parsed as JSON
};

struct KeyRow;
// Reads the key's value into `c`, adding a problem named after the key for a
// bad one. Rows are read in table order, so a row may use the ones above it.
using ReadFn = void (*)(const KeyRow& row, const Sourced& v, Config& c, Problems& p);
// The value --print-config shows for the key; `redact` hides credentials.
using WriteFn = json (*)(const KeyRow& row, const Config& c, bool redact);
// A rule beyond the type for a string or a list of strings (a URL's shape,
// the placeholders of an argument); the value is kept either way.
using StringCheck = void (*)(const KeyRow& row, const std::string& s, const Sourced& v,
                             Problems& p);
using ListCheck = void (*)(const KeyRow& row, const std::vector<std::string>& list,
                           const Sourced& v, const Config& c, Problems& p);

// One config key. Nested keys are dotted ("compression.level").
struct KeyRow {
  const char* key;
  const char* default_json;  // the default, as JSON text
  Kind kind;
  ReadFn read;
  WriteFn write;
  // A valid value other than the default, as JSON text: the unit tests set
  // each key to it and expect --print-config to show the change.
  const char* sample;
  // The rules the generic readers of agent/config/config_rows.h apply.
  long long min = 0, max = 0;   // an integer's bounds
  const char* range = nullptr;  // said of an integer out of bounds; nullptr: "must be at least"
  bool zero_ok = false;         // a duration of 0 is allowed
  const char* empty = nullptr;  // why "" is refused, as "must not be empty (<empty>)"
  bool trim_slash = false;      // a path loses its trailing '/'
  bool comma_list = false;      // as text, "a, b" is a list
  bool redact = false;          // a URL, or arguments, --print-config redacts
  StringCheck string_check = nullptr;
  ListCheck list_check = nullptr;
};

// The table, in the order --print-config writes the keys.
std::span<const KeyRow> Rows();
// The key's row; nullptr for an unknown key.
const KeyRow* FindRow(std::string_view key);
// Whether `key` names a section ("compression") rather than a key.
bool IsSection(std::string_view key);
// The sections, in table order.
std::vector<std::string> Sections();
// The patterns a preset watches when "patterns" is not configured.
std::vector<std::string> DefaultPatterns(Preset preset);

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
// checkpoint_cadence.mode: "auto" asks at Young's interval.
inline constexpr std::pair<std::string_view, bool> kCadenceModes[] = {{"off", false},
                                                                      {"auto", true}};
inline constexpr std::pair<std::string_view, Shuffle> kShuffleNames[] = {
    {"auto", Shuffle::kAuto}, {"off", Shuffle::kOff}, {"2", Shuffle::kTwo}, {"4", Shuffle::kFour}};

}  // namespace sg::config_detail
