// The config key table's lookups, each preset's default patterns, and the
// public names derived from the table (ConfigKeys, EnvVarForKey, PresetName).
#include "agent/config_keys.h"

#include <algorithm>

#include "common/strings.h"

namespace sg {
namespace config_detail {

const KeySpec* FindSpec(std::string_view key) {
  for (const KeySpec& s : kKeys) {
    if (key == s.key) return &s;
  }
  return nullptr;
}

bool IsSection(std::string_view key) {
  return std::any_of(std::begin(kSections), std::end(kSections),
                     [&](const char* s) { return key == s; });
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

using config_detail::KeySpec;
using config_detail::kKeys;
using config_detail::kPresets;

std::vector<std::string> ConfigKeys() {
  std::vector<std::string> out;
  for (const KeySpec& s : kKeys) out.emplace_back(s.key);
  return out;
}

std::string EnvVarForKey(const std::string& key) {
  std::string name = "SPOTGUARD_" + ToUpper(key);
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

std::string_view PresetName(Preset p) {
  for (const auto& [name, value] : kPresets) {
    if (value == p) return name;
  }
  return "generic";
}

}  // namespace sg
