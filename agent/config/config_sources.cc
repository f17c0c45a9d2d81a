// Reading config values from their sources: the JSON config file (with
// comments, unknown keys reported with a guess), SPOTGUARD_<KEY> variables
// and flags given as text, and the command after "--".
#include "agent/config/config_sources.h"

#include <algorithm>

#include "agent/config/config_keys.h"
#include "common/files.h"
#include "common/strings.h"

namespace sg::config_detail {
namespace {

void LoadFile(const std::string& path, std::map<std::string, Sourced>& values, Problems& problems) {
  auto text = ReadFileToString(path);
  if (!text.ok()) {
    problems.Add("config", "cannot read " + path + ": " + text.status().message());
    return;
  }
  json doc;
  try {
    doc = json::parse(*text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at line..."
    if (size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    problems.Add("config", path + " is not valid JSON: " + what);
    return;
  } catch (const json::exception& e) {
    // out_of_range.406: a number too big for a double, such as 1e400.
    std::string what = e.what();
    if (size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    problems.Add("config", path + " is not usable JSON: " + what);
    return;
  }
  if (!doc.is_object()) {
    problems.Add("config", path + " must hold a JSON object, not " + std::string(doc.type_name()));
    return;
  }
  std::vector<std::string> known = ConfigKeys();
  for (std::string& s : Sections()) known.push_back(std::move(s));
  auto unknown = [&](const std::string& key) {
    std::string msg = "unknown key in " + path;
    if (std::string guess = ClosestMatch(key, known); !guess.empty()) {
      msg += "; did you mean \"" + guess + "\"?";
    }
    problems.Add(key, msg);
  };
  for (const auto& [key, value] : doc.items()) {
    if (IsSection(key) && value.is_string() && FindRow(key + ".mode")) {
      values[key + ".mode"] = {value, path};  // "checkpoint_cadence": "auto"
    } else if (IsSection(key)) {
      if (!value.is_object()) {
        problems.Add(key, "must be an object, got " + Describe(value), path);
        continue;
      }
      for (const auto& [sub, subvalue] : value.items()) {
        const std::string dotted = key + "." + sub;
        if (FindRow(dotted)) {
          values[dotted] = {subvalue, path};
        } else {
          unknown(dotted);
        }
      }
    } else if (FindRow(key)) {
      values[key] = {value, path};
    } else {
      unknown(key);
    }
  }
}

// A value given as text (environment, flag) turned into the JSON the file
// would hold. Returns false with a problem added when it cannot be.
bool FromText(const KeyRow& spec, const std::string& text, const std::string& source, json* out,
              Problems& problems) {
  const bool nullable = spec.kind == Kind::kNullableString ||
                        spec.kind == Kind::kNullableDuration ||
                        spec.kind == Kind::kNullableStringList ||
                        spec.kind == Kind::kNullableJson;
  if (nullable && (text.empty() || text == "null")) {
    *out = nullptr;
    return true;
  }
  switch (spec.kind) {
    case Kind::kInt: {
      try {
        size_t used = 0;
        long long n = std::stoll(text, &used);
        if (used == text.size()) {
          *out = n;
          return true;
        }
      } catch (const std::exception&) {
      }
      *out = text;  // reported as "must be an integer" with the value
      return true;
    }
    case Kind::kStringList:
    case Kind::kNullableStringList:
      if (!text.empty() && text.front() == '[') {
        try {
          *out = json::parse(text);
          return true;
        } catch (const json::exception&) {  // parse_error, or out_of_range for 1e400
          problems.Add(spec.key, "is not a valid JSON array: " + text, source);
          return false;
        }
      }
      if (spec.comma_list) {
        json list = json::array();
        for (const std::string& p : Split(text, ',')) list.push_back(std::string(Trim(p)));
        *out = std::move(list);
        return true;
      }
      problems.Add(spec.key, "must be a JSON array of strings, e.g. [\"python3\", \"train.py\"]",
                   source);
      return false;
    case Kind::kNullableJson:
      try {
        *out = json::parse(text);
        return true;
      } catch (const json::exception&) {
        problems.Add(spec.key, "is not valid JSON: " + text, source);
        return false;
      }
    default:
      *out = text;
      return true;
  }
}

}  // namespace

SourcedValues GatherValues(const ConfigSources& sources, Problems& problems) {
  SourcedValues values;
  for (const KeyRow& s : Rows()) values[s.key] = {json::parse(s.default_json), "default"};

  if (sources.file) LoadFile(*sources.file, values, problems);
  for (const KeyRow& s : Rows()) {
    const std::string env_name = EnvVarForKey(s.key);
    if (auto it = sources.env.find(env_name); it != sources.env.end()) {
      json v;
      if (FromText(s, it->second, env_name, &v, problems)) values[s.key] = {v, env_name};
    }
  }
  for (const auto& [key, text] : sources.flags) {
    const KeyRow* s = FindRow(key);
    if (s == nullptr) continue;  // the CLI only passes known keys
    std::string flag = "--" + key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    std::replace(flag.begin(), flag.end(), '.', '-');
    json v;
    if (FromText(*s, text, flag, &v, problems)) values[key] = {v, flag};
  }
  if (!sources.command_args.empty()) {
    values["command"] = {json(sources.command_args), "the arguments after --"};
  }
  return values;
}

}  // namespace sg::config_detail
