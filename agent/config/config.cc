// LoadConfig: the values from every source (agent/config/config_sources.h) read key
// by key through the rows of the config table (agent/config/config_keys.h), then
// checked as a whole (docs/design.md §3), every problem reported at once.
#include "agent/config/config.h"

#include <algorithm>
#include <regex>
#include <set>

#include "agent/config/config_keys.h"
#include "agent/config/config_sources.h"
#include "agent/config/config_values.h"
#include "agent/config/engine_identity.h"

namespace sg {
namespace {

using config_detail::Problems;

// What a whole-config check sees: the config as read, which keys were read
// without a problem, and where each value came from.
struct WholeConfig {
  const Config& c;
  const ConfigNeeds& needs;
  const config_detail::SourcedValues& values;
  const std::set<std::string>& bad;  // keys whose value had a problem

  bool Good(std::initializer_list<const char*> keys) const {
    return std::none_of(keys.begin(), keys.end(), [&](const char* k) { return bad.contains(k); });
  }
  const std::string& From(const char* key) const { return values.at(key).source; }
};

void CheckBackoffOrder(const WholeConfig& w, Problems& p) {
  if (w.Good({"restart.backoff", "restart.max_backoff"}) &&
      w.c.restart.max_backoff < w.c.restart.backoff) {
    p.Add("restart.max_backoff",
          "must be at least restart.backoff (" + FormatDuration(w.c.restart.backoff) + ")",
          w.From("restart.max_backoff"));
  }
}

// `<section>.timeout` at least twice `<section>.heartbeat`, so that one late
// beat (`what`) does not count as gone.
void CheckTwiceTheHeartbeat(const WholeConfig& w, Problems& p, const std::string& section,
                            Duration heartbeat, Duration timeout, const char* what) {
  const std::string hb = section + ".heartbeat", to = section + ".timeout";
  if (w.Good({hb.c_str(), to.c_str()}) && timeout < 2 * heartbeat) {
    p.Add(to, "must be at least twice " + hb + " (" + FormatDuration(heartbeat) + "), so " + what,
          w.From(to.c_str()));
  }
}

void CheckLeaseTimeout(const WholeConfig& w, Problems& p) {
  CheckTwiceTheHeartbeat(w, p, "lease", w.c.lease.heartbeat, w.c.lease.timeout,
                         "one late renewal does not lose the lease");
}

void CheckGroupTimeout(const WholeConfig& w, Problems& p) {
  CheckTwiceTheHeartbeat(w, p, "group", w.c.group.heartbeat, w.c.group.timeout,
                         "one late heartbeat does not end a round");
}

void CheckCadence(const WholeConfig& w, Problems& p) {
  const auto& cadence = w.c.checkpoint_cadence;
  if (w.Good({"checkpoint_cadence.min", "checkpoint_cadence.max", "checkpoint_cadence.mtbf"}) &&
      cadence.max < cadence.min) {
    p.Add("checkpoint_cadence.max",
          "must be at least checkpoint_cadence.min (" + FormatDuration(cadence.min) + ")",
          w.From("checkpoint_cadence.max"));
  }
  if (cadence.automatic && !w.c.checkpoint_signal) {
    p.Add("checkpoint_cadence.mode",
          "\"auto\" needs checkpoint_signal: the agent asks the trainer for each checkpoint with "
          "it",
          w.From("checkpoint_cadence.mode"));
  }
}

// What the subcommand needs, and the job name's shape.
void CheckJob(const WholeConfig& w, Problems& p) {
  static const std::regex kJobName(R"([A-Za-z0-9][A-Za-z0-9._-]{0,127})");
  if (w.c.job.empty()) {
    if (w.needs.job) {
      p.Add("job", "is required; set \"job\" in the config file, SPOTGUARD_JOB or --job");
    }
  } else if (!w.Good({"job"})) {
    // {index} without an index: said when read.
  } else if (!std::regex_match(w.c.job, kJobName)) {
    p.Add("job",
          "\"" + w.c.job +
              "\" must be 1-128 letters, digits, '.', '_' or '-', starting with "
              "a letter or digit",
          w.From("job"));
  }
}

void CheckCheckpointDir(const WholeConfig& w, Problems& p) {
  if (w.needs.checkpoint_dir && w.c.checkpoint_dir.empty()) {
    p.Add("checkpoint_dir",
          "is required; set \"checkpoint_dir\" in the config file, "
          "SPOTGUARD_CHECKPOINT_DIR or --checkpoint-dir");
  }
}

void CheckLogDir(const WholeConfig& w, Problems& p) {
  const std::string& logs = w.c.log_dir;
  const std::string& ckpt = w.c.checkpoint_dir;
  if (!logs.empty() && !ckpt.empty() && (logs == ckpt || logs.starts_with(ckpt + "/"))) {
    // Every log line would be an inotify event of the watcher, and the
    // logs could end up in snapshots.
    p.Add("log_dir", "must not be inside checkpoint_dir (" + ckpt + ")", w.From("log_dir"));
  }
}

void CheckCommand(const WholeConfig& w, Problems& p) {
  if (w.needs.command && w.c.command.empty()) {
    p.Add("command",
          "is required; set \"command\" in the config file or give it after --, as in "
          "spotguard run -- python3 train.py");
  }
}

// The rules that span keys, in the order their problems are reported.
constexpr void (*kWholeConfigChecks[])(const WholeConfig&, Problems&) = {
    CheckBackoffOrder, CheckLeaseTimeout,  CheckGroupTimeout, CheckCadence,
    CheckJob,          CheckCheckpointDir, CheckLogDir,       CheckCommand,
};

}  // namespace

ConfigResult LoadConfig(const ConfigSources& sources, const ConfigNeeds& needs) {
  Problems problems;
  const config_detail::SourcedValues values = config_detail::GatherValues(sources, problems);

  Config c;
  const EngineIdentityResult engine = ReadEngineIdentity(sources.env);
  for (const std::string& why : engine.problems) problems.Add("environment", why);
  c.index = engine.identity.index;
  c.engine_attempt = engine.identity.attempt;

  std::set<std::string> bad;
  for (const config_detail::KeyRow& row : config_detail::Rows()) {
    const size_t before = problems.list().size();
    row.read(row, values.at(row.key), c, problems);
    if (problems.list().size() > before) bad.insert(row.key);
  }
  const WholeConfig whole{c, needs, values, bad};
  for (auto check : kWholeConfigChecks) check(whole, problems);

  ConfigResult result;
  result.problems = std::move(problems.list());
  if (result.ok()) result.config = std::move(c);
  return result;
}

}  // namespace sg
