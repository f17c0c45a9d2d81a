#include "agent/config_policies.h"

#include <filesystem>

#include "agent/prices.h"
#include "common/duration.h"

namespace sg {
namespace config_detail {
namespace {

void ReadCompleteWhen(const Sourced& v, Config& c, Problems& p) {
  if (v.value.is_null()) return;
  const std::string key = "complete_when";
  if (!v.value.is_object() || v.value.empty()) {
    p.Add(key,
          "must be an object such as {\"step_at_least\": 100000} or {\"file_exists\": \"DONE\"}, "
          "got " + Describe(v.value),
          v.source);
    return;
  }
  CompleteWhen when;
  for (const auto& [name, value] : v.value.items()) {
    if (name == "step_at_least") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0) {
        p.Add(key + ".step_at_least", "must be a whole number >= 0, got " + Describe(value),
              v.source);
        continue;
      }
      when.step_at_least = value.get<int64_t>();
    } else if (name == "file_exists") {
      const std::string file = value.is_string() ? value.get<std::string>() : "";
      if (file.empty() || file.front() == '/' || file.find("..") != std::string::npos) {
        p.Add(key + ".file_exists",
              "must be a path relative to checkpoint_dir, without \"..\", got " + Describe(value),
              v.source);
        continue;
      }
      when.file_exists = file;
    } else {
      p.Add(key + "." + name, "unknown condition (known: step_at_least, file_exists)", v.source);
    }
  }
  c.complete_when = when;
}

// metrics_file (absolute) and prices (each entry checked).
void ReadLedgerKeys(const SourcedValues& values, Config& c, Problems& p) {
  const Sourced& file = values.at("metrics_file");
  if (!file.value.is_null()) {
    if (auto v = ReadString("metrics_file", file, p)) {
      if (v->empty()) {
        p.Add("metrics_file", "must not be empty (use null for none)", file.source);
      } else {
        std::error_code ec;
        c.metrics_file = std::filesystem::absolute(*v, ec).lexically_normal().string();
      }
    }
  }
  const Sourced& prices = values.at("prices");
  if (auto v = ReadStringList("prices", prices, p)) {
    if (auto parsed = ParsePrices(*v); !parsed.ok()) {
      p.Add("prices", parsed.status().message(), prices.source);
    } else {
      c.prices = *v;
    }
  }
}

}  // namespace

void ReadPolicyKeys(const SourcedValues& values, Config& c, Problems& p) {
  auto at = [&](const char* key) -> const Sourced& { return values.at(key); };
  if (auto n = ReadInt("resume.max_failures", at("resume.max_failures"), p)) {
    if (*n < 1 || *n > 1000) {
      p.Add("resume.max_failures", "must be 1 to 1000, got " + std::to_string(*n),
            at("resume.max_failures").source);
    } else {
      c.resume.max_failures = static_cast<int>(*n);
    }
  }
  ReadCompleteWhen(at("complete_when"), c, p);
  constexpr std::pair<std::string_view, bool> kModes[] = {{"off", false}, {"auto", true}};
  if (auto v = ReadChoice("checkpoint_cadence.mode", at("checkpoint_cadence.mode"), kModes, p)) {
    c.checkpoint_cadence.automatic = *v;
  }
  bool durations_ok = true;
  for (auto [key, out] : {std::pair{"checkpoint_cadence.min", &c.checkpoint_cadence.min},
                          std::pair{"checkpoint_cadence.max", &c.checkpoint_cadence.max},
                          std::pair{"checkpoint_cadence.mtbf", &c.checkpoint_cadence.mtbf}}) {
    auto d = ReadDuration(key, at(key), p);
    if (!d || d->count() == 0) {
      if (d) p.Add(key, "must be longer than 0", at(key).source);
      durations_ok = false;
      continue;
    }
    *out = *d;
  }
  if (durations_ok && c.checkpoint_cadence.max < c.checkpoint_cadence.min) {
    p.Add("checkpoint_cadence.max",
          "must be at least checkpoint_cadence.min (" +
              FormatDuration(c.checkpoint_cadence.min) + ")",
          at("checkpoint_cadence.max").source);
  }
  if (c.checkpoint_cadence.automatic && !c.checkpoint_signal) {
    p.Add("checkpoint_cadence.mode",
          "\"auto\" needs checkpoint_signal: the agent asks the trainer for each checkpoint with "
          "it", at("checkpoint_cadence.mode").source);
  }
  if (auto n = ReadInt("fleet.max_attempts", at("fleet.max_attempts"), p)) {
    if (*n < 0 || *n > 1000) {
      p.Add("fleet.max_attempts", "must be 0 (unknown) to 1000, got " + std::to_string(*n),
            at("fleet.max_attempts").source);
    } else {
      c.fleet_max_attempts = static_cast<int>(*n);
    }
  }
  ReadLedgerKeys(values, c, p);
}

}  // namespace config_detail

void AddPolicyKeys(const Config& c, nlohmann::ordered_json& j) {
  using ojson = nlohmann::ordered_json;
  j["resume"] = {{"max_failures", c.resume.max_failures}};
  if (c.complete_when) {
    ojson when = ojson::object();
    if (c.complete_when->step_at_least) when["step_at_least"] = *c.complete_when->step_at_least;
    if (c.complete_when->file_exists) when["file_exists"] = *c.complete_when->file_exists;
    j["complete_when"] = std::move(when);
  } else {
    j["complete_when"] = nullptr;
  }
  j["checkpoint_cadence"] = {{"mode", c.checkpoint_cadence.automatic ? "auto" : "off"},
                             {"min", FormatDuration(c.checkpoint_cadence.min)},
                             {"max", FormatDuration(c.checkpoint_cadence.max)},
                             {"mtbf", FormatDuration(c.checkpoint_cadence.mtbf)}};
  j["fleet"] = {{"max_attempts", c.fleet_max_attempts}};
  j["metrics_file"] = c.metrics_file.empty() ? ojson(nullptr) : ojson(c.metrics_file);
  j["prices"] = c.prices;
}

}  // namespace sg
