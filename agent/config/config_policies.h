// The config keys with rules of their own (docs/design.md §3, docs/config.md):
// the read, write and check functions their rows in agent/config/config_keys.cc
// name. Each follows ReadFn, WriteFn, StringCheck or ListCheck
// (agent/config/config_keys.h). Internal to agent/config*.cc.
#pragma once

#include <string_view>

#include "agent/config/config_keys.h"
#include "common/log.h"

namespace sg::config_detail {

// job: {index} replaced by the engine's index, which ReadJob needs in c.index.
void ReadJob(const KeyRow& row, const Sourced& v, Config& c, Problems& p);
// store: a store URL (common/store_url.h), kept in its normal form.
void ReadStore(const KeyRow& row, const Sourced& v, Config& c, Problems& p);
// checkpoint_dir: "" (unset) or made absolute.
void ReadCheckpointDir(const KeyRow& row, const Sourced& v, Config& c, Problems& p);
// patterns: null for the preset's own (read after preset), else a non-empty
// list of non-empty patterns.
void ReadPatterns(const KeyRow& row, const Sourced& v, Config& c, Problems& p);
// checkpoint_signal: a signal or "none"; null for the preset's default (read
// after preset). Written as the signal's name or "none".
void ReadCheckpointSignal(const KeyRow& row, const Sourced& v, Config& c, Problems& p);
json WriteCheckpointSignal(const KeyRow& row, const Config& c, bool redact);
// command, resume_args: only known placeholders, {index} only with an index.
void CheckPlaceholders(const KeyRow& row, const std::vector<std::string>& args, const Sourced& v,
                       const Config& c, Problems& p);
// endpoint: an http:// or https:// URL.
void CheckHttpUrl(const KeyRow& row, const std::string& s, const Sourced& v, Problems& p);
// imds.endpoint: an http:// or https:// URL, kept without trailing '/'.
void ReadImdsEndpoint(const KeyRow& row, const Sourced& v, Config& c, Problems& p);
// group.address: a host name or IP address, as peers' command lines take it.
void CheckHostName(const KeyRow& row, const std::string& s, const Sourced& v, Problems& p);
// compression.shuffle: "auto", "off", 2 or 4 (the numbers also as text).
void ReadShuffle(const KeyRow& row, const Sourced& v, Config& c, Problems& p);
json WriteShuffle(const KeyRow& row, const Config& c, bool redact);
// complete_when: null or an object of conditions (CompleteWhen).
void ReadCompleteWhen(const KeyRow& row, const Sourced& v, Config& c, Problems& p);
json WriteCompleteWhen(const KeyRow& row, const Config& c, bool redact);
// prices: entries of "TYPE=SPOT/ON_DEMAND" (agent/config/prices.h).
void CheckPrices(const KeyRow& row, const std::vector<std::string>& prices, const Sourced& v,
                 const Config& c, Problems& p);
// log_format's name, as ParseLogFormat reads it.
std::string_view LogFormatName(LogFormat format);

}  // namespace sg::config_detail
