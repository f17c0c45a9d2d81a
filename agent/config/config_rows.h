// The builders of the config table's rows (docs/design.md §3): one reader and
// one writer per common kind of key (bounded integer, duration, string, path,
// list, named choice, parsed value), so that a row of such a key says only its
// name, default, field and bounds. The field is given by an accessor,
//   [](auto& c) -> auto& { return c.restart.max; }
// which reaches it in a Config and, for --print-config, in a const one.
// Internal to agent/config*.cc.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "agent/config/config_keys.h"

namespace sg::config_detail {

// user:password@ in a URL replaced by "<redacted>" (agent/config/config_to_json.cc).
std::string RedactUrl(const std::string& url);

template <typename T>
inline constexpr bool kIsOptional = false;
template <typename T>
inline constexpr bool kIsOptional<std::optional<T>> = true;

// The type of the Config field an accessor reaches.
template <typename Get>
using FieldOf = std::remove_cvref_t<decltype(Get{}(std::declval<Config&>()))>;

// ---- Readers: each adds problems named after row.key and sets the field.

template <typename Get>
void ReadIntField(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  auto n = ReadInt(row.key, v, p);
  if (!n) return;
  if (*n >= row.min && *n <= row.max) {
    Get{}(c) = static_cast<FieldOf<Get>>(*n);
    return;
  }
  const std::string got = ", got " + std::to_string(*n);
  if (row.range != nullptr) {
    p.Add(row.key, row.range + got, v.source);
  } else if (*n < row.min) {
    p.Add(row.key, "must be at least " + std::to_string(row.min) + got, v.source);
  } else {
    p.Add(row.key, "must be at most " + std::to_string(row.max) + got, v.source);
  }
}

// A Duration, or an optional one that null leaves unset.
template <typename Get>
void ReadDurationField(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  constexpr bool kNullable = kIsOptional<FieldOf<Get>>;
  if constexpr (kNullable) {
    if (v.value.is_null()) {
      Get{}(c) = std::nullopt;
      return;
    }
  }
  auto d = ReadDuration(row.key, v, p);
  if (!d) return;
  if (!row.zero_ok && d->count() == 0) {
    p.Add(row.key,
          kNullable ? "must be longer than 0 (use null to turn it off)" : "must be longer than 0",
          v.source);
  }
  Get{}(c) = *d;
}

// A non-null value as a string that is not ""; nullopt, with the problem
// added, when it is another type or "" (row.empty says what to write instead).
inline std::optional<std::string> ReadNonEmptyString(const KeyRow& row, const Sourced& v,
                                                     Problems& p) {
  auto s = ReadString(row.key, v, p);
  if (s && s->empty()) {
    p.Add(row.key, std::string("must not be empty (") + row.empty + ")", v.source);
    return std::nullopt;
  }
  return s;
}

// An optional string that null leaves unset and that must not be "".
template <typename Get>
void ReadStringField(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  if (v.value.is_null()) {
    Get{}(c) = std::nullopt;
    return;
  }
  auto s = ReadNonEmptyString(row, v, p);
  if (!s) return;
  if (row.string_check != nullptr) row.string_check(row, *s, v, p);
  Get{}(c) = *s;
}

// A path made absolute; null leaves the field "" (unset).
template <typename Get>
void ReadPathField(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  if (v.value.is_null()) {
    Get{}(c).clear();
    return;
  }
  auto s = ReadNonEmptyString(row, v, p);
  if (!s) return;
  Get{}(c) = AbsolutePath(*s, row.trim_slash);
}

template <typename Get>
void ReadListField(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  auto list = ReadStringList(row.key, v, p);
  if (!list) return;
  if (row.list_check != nullptr) row.list_check(row, *list, v, c, p);
  Get{}(c) = std::move(*list);
}

// One of the names of `Table` (a {name, value} array).
template <const auto& Table, typename Get>
void ReadChoiceField(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  if (auto value = ReadChoice(row.key, v, Table, p)) Get{}(c) = *value;
}

// A string `Parse` turns into the field's value or a problem.
template <auto Parse, auto Name, typename Get>
void ReadParsedField(const KeyRow& row, const Sourced& v, Config& c, Problems& p) {
  if (auto value = ReadParsed(row.key, v, Parse, p)) Get{}(c) = *value;
}

// ---- Writers: the value as a config file would hold it.

// An integer, string (a URL, redacted on request), optional string or list
// of strings (arguments, redacted on request) as it is.
template <typename Get>
json WriteField(const KeyRow& row, const Config& c, bool redact) {
  using F = FieldOf<Get>;
  const F& f = Get{}(c);
  const bool hide = redact && row.redact;
  if constexpr (std::is_same_v<F, std::vector<std::string>>) {
    return hide ? json(RedactArgs(f)) : json(f);
  } else if constexpr (std::is_same_v<F, std::string>) {
    return hide ? RedactUrl(f) : f;
  } else if constexpr (std::is_same_v<F, std::optional<std::string>>) {
    return f ? json(hide ? RedactUrl(*f) : *f) : json(nullptr);
  } else {
    return json(f);
  }
}

template <typename Get>
json WriteDuration(const KeyRow&, const Config& c, bool) {
  const auto& d = Get{}(c);
  if constexpr (kIsOptional<FieldOf<Get>>) {
    return d ? json(FormatDuration(*d)) : json(nullptr);
  } else {
    return FormatDuration(d);
  }
}

// A path; "" (unset) as null.
template <typename Get>
json WritePath(const KeyRow&, const Config& c, bool) {
  const std::string& path = Get{}(c);
  return path.empty() ? json(nullptr) : json(path);
}

template <const auto& Table, typename Get>
json WriteChoice(const KeyRow&, const Config& c, bool) {
  for (const auto& [name, value] : Table) {
    if (value == Get{}(c)) return std::string(name);
  }
  return std::string();
}

template <auto Name, typename Get>
json WriteNamed(const KeyRow&, const Config& c, bool) {
  return json(Name(Get{}(c)));
}

// ---- Row builders. `def` and `sample` are JSON text (KeyRow).

// An integer of [min, max]; `range`, when given, is what a value outside is
// told instead of "must be at least <min>" or "must be at most <max>".
template <typename Get>
constexpr KeyRow IntRow(const char* key, const char* def, Get, long long min, long long max,
                        const char* sample, const char* range = nullptr) {
  return {.key = key,
          .default_json = def,
          .kind = Kind::kInt,
          .read = &ReadIntField<Get>,
          .write = &WriteField<Get>,
          .sample = sample,
          .min = min,
          .max = max,
          .range = range};
}

// A duration string, 0 refused unless `zero_ok`; nullable when the field is
// optional.
template <typename Get>
constexpr KeyRow DurationRow(const char* key, const char* def, Get, bool zero_ok,
                             const char* sample) {
  return {.key = key,
          .default_json = def,
          .kind = kIsOptional<FieldOf<Get>> ? Kind::kNullableDuration : Kind::kDuration,
          .read = &ReadDurationField<Get>,
          .write = &WriteDuration<Get>,
          .sample = sample,
          .zero_ok = zero_ok};
}

// A string, null by default, that must not be "" when set; `check` for more.
template <typename Get>
constexpr KeyRow StringRow(const char* key, Get, const char* sample, StringCheck check = nullptr) {
  return {.key = key,
          .default_json = "null",
          .kind = Kind::kNullableString,
          .read = &ReadStringField<Get>,
          .write = &WriteField<Get>,
          .sample = sample,
          .empty = "use null to leave it unset",
          .string_check = check};
}

// A path, null by default (""), made absolute when set; `empty` says why ""
// is refused.
template <typename Get>
constexpr KeyRow PathRow(const char* key, Get, const char* empty, bool trim_slash,
                         const char* sample) {
  return {.key = key,
          .default_json = "null",
          .kind = Kind::kNullableString,
          .read = &ReadPathField<Get>,
          .write = &WritePath<Get>,
          .sample = sample,
          .empty = empty,
          .trim_slash = trim_slash};
}

template <typename Get>
constexpr KeyRow ListRow(const char* key, const char* def, Get, const char* sample,
                         ListCheck check = nullptr) {
  return {.key = key,
          .default_json = def,
          .kind = Kind::kStringList,
          .read = &ReadListField<Get>,
          .write = &WriteField<Get>,
          .sample = sample,
          .list_check = check};
}

template <const auto& Table, typename Get>
constexpr KeyRow ChoiceRow(const char* key, const char* def, Get, const char* sample) {
  return {.key = key,
          .default_json = def,
          .kind = Kind::kString,
          .read = &ReadChoiceField<Table, Get>,
          .write = &WriteChoice<Table, Get>,
          .sample = sample};
}

// A string read by `Parse` (StatusOr<T>(std::string_view)) and written by
// `Name` (T -> its name).
template <auto Parse, auto Name, typename Get>
constexpr KeyRow ParsedRow(const char* key, const char* def, Get, const char* sample) {
  return {.key = key,
          .default_json = def,
          .kind = Kind::kString,
          .read = &ReadParsedField<Parse, Name, Get>,
          .write = &WriteNamed<Name, Get>,
          .sample = sample};
}

// A key with rules of its own (agent/config/config_policies.h).
constexpr KeyRow CustomRow(const char* key, const char* def, Kind kind, ReadFn read, WriteFn write,
                           const char* sample) {
  return {.key = key,
          .default_json = def,
          .kind = kind,
          .read = read,
          .write = write,
          .sample = sample};
}
// A key read by rules of its own into a field written as it is (WriteField).
template <typename Get>
constexpr KeyRow CustomReadRow(const char* key, const char* def, Kind kind, ReadFn read, Get,
                               const char* sample) {
  return CustomRow(key, def, kind, read, &WriteField<Get>, sample);
}

// Modifiers: --print-config redacts the value (a URL, or arguments).
constexpr KeyRow Redacted(KeyRow row) {
  row.redact = true;
  return row;
}
// As text (environment, flag), "a, b" is the list ["a", "b"].
constexpr KeyRow CommaList(KeyRow row) {
  row.comma_list = true;
  return row;
}

}  // namespace sg::config_detail
