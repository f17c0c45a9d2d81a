#include "agent/cli/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <optional>

#include "agent/cli/doctor_command.h"
#include "agent/cli/drill.h"
#include "agent/cli/group_commands.h"
#include "agent/cli/logs_command.h"
#include "agent/cli/report_command.h"
#include "agent/cli/snapshot_commands.h"
#include "agent/cli/status_command.h"
#include "agent/cli/watch_command.h"
#include "agent/config/config.h"
#include "agent/config/exit_codes.h"
#include "agent/run/daemon.h"
#include "agent/run/suspect.h"
#include "common/log.h"
#include "common/version.h"

namespace sg {
namespace {

constexpr const char* kExitCodesHelp =
    "Exit codes: 0 done; 1 runtime failure; 2 usage or config error; 3 nothing to restore;\n"
    "            4 fenced (another instance holds the job, or another agent on this host\n"
    "            holds the checkpoint dir); 74 stopped before completion, the newest\n"
    "            checkpoint not committed; 75 stopped before completion (notice, SIGTERM)\n"
    "            after the final snapshot was committed: retry it.\n"
    "Every option is also a config key and an environment variable SPOTGUARD_<KEY>;\n"
    "precedence: flag > environment > config file > default.";

// Options every subcommand takes, each naming the config key it sets.
struct CommonOption {
  const char* flag;
  const char* key;
  const char* type;
  const char* help;
};
constexpr CommonOption kCommonOptions[] = {
    {"--job", "job", "NAME", "Job name: the store keeps each job under <store>/<job>/"},
    {"--store", "store", "URL", "s3://BUCKET/PREFIX or file:///PATH"},
    {"--checkpoint-dir", "checkpoint_dir", "DIR", "Where the trainer writes checkpoints"},
    {"--preset", "preset", "NAME",
     "caffe | pytorch | lightning | huggingface | tensorflow | dcp | generic"},
    {"--region", "region", "REGION", "AWS region of the bucket"},
    {"--endpoint", "endpoint", "URL", "S3-compatible endpoint (default: AWS)"},
    {"--imds-endpoint", "imds.endpoint", "URL", "Instance metadata service endpoint"},
    {"--nodes", "nodes", "N", "Instances that train the job together (1: one instance)"},
    {"--log-level", "log_level", "LEVEL", "trace | debug | info | warn | error | off"},
    {"--log-format", "log_format", "FORMAT", "text | json"},
};

struct Invocation {
  std::optional<std::string> config_file;
  std::map<std::string, std::string> flags;
  std::vector<std::string> command_args;
  bool print_config = false;
};

void AddCommonOptions(CLI::App* sub, Invocation& inv) {
  sub->add_option_function<std::string>(
         "-c,--config", [&inv](const std::string& v) { inv.config_file = v; },
         "Config file (JSON; // comments allowed)")
      ->type_name("FILE");
  for (const CommonOption& o : kCommonOptions) {
    const std::string key = o.key;
    sub->add_option_function<std::string>(
           o.flag, [&inv, key](const std::string& v) { inv.flags[key] = v; }, o.help)
        ->type_name(o.type)
        ->group("Common options");
  }
}

struct Subcommand {
  const char* name;
  const char* description;
  ConfigNeeds needs;
};

constexpr Subcommand kSubcommands[] = {
    {"run",
     "Restore the newest snapshot (if any), start the trainer, upload snapshots on schedule, "
     "handle interruption notices and completion; exits when the job ends",
     {.job = true, .checkpoint_dir = true, .command = true}},
    {"restore",
     "Download the newest (or --snapshot SEQ) snapshot into the checkpoint dir (or --to DIR) "
     "and print the resume path; exit 3 if the store has none",
     {.job = true, .checkpoint_dir = false, .command = false}},
    {"snapshot",
     "Capture the newest complete local checkpoint (or the given files or --dir) and upload "
     "it now; prints the new SEQ",
     {.job = true, .checkpoint_dir = false, .command = false}},
    {"ls",
     "List committed snapshots: seq, time, size, stored size, step",
     {.job = true, .checkpoint_dir = false, .command = false}},
    {"verify",
     "Download a snapshot and check every checksum; quarantines the objects found damaged",
     {.job = true, .checkpoint_dir = false, .command = false}},
    {"gc",
     "Apply retention (keep; logs_keep for the logs) and abort orphaned multipart uploads",
     {.job = true, .checkpoint_dir = false, .command = false}},
    {"unsuspect",
     "Clear the suspect mark of snapshot SEQ (set when the trainer failed resume.max_failures "
     "times resuming from it), so the next start may resume from it; exit 3 if it has none",
     {.job = true, .checkpoint_dir = false, .command = false}},
    {"status",
     "Job state: lease holder, newest snapshot, last upload, completion, recent interruptions",
     {.job = true, .checkpoint_dir = false, .command = false}},
    {"reset-failure",
     "Clear the failure of a job of several nodes (too many crashed rounds; `status` shows it), "
     "so that its agents start it again from the newest group snapshot",
     {.job = true, .checkpoint_dir = false, .command = false}},
    {"logs",
     "Print the trainer's and the agent's log lines shipped to the store (the newest attempt, "
     "or --attempt N / --instance ID), from any machine",
     {.job = true, .checkpoint_dir = false, .command = false}},
    {"report",
     "Goodput by cause, interruptions, checkpoint cost and every attempt of the job, from its "
     "events in the store (--json, --html FILE for a page with the timeline)",
     {.job = true, .checkpoint_dir = false, .command = false}},
    {"watch",
     "Print interruption events (spot notice, rebalance, ASG lifecycle) as they arrive",
     {}},
    {"drill",
     "Rehearse on one machine: run the job, inject an interruption, restore into a fresh dir, "
     "resume, and report the work lost and the time to resume",
     {.job = false, .checkpoint_dir = false, .command = true}},
    {"doctor",
     "Check credentials, bucket access, conditional-write support, clock skew, IMDS "
     "reachability and disk space",
     {}},
};

// Subcommand options that only exist to be passed on; kept in one place so
// --help shows them before the commands are built.
struct ExtraOptions {
  std::string snapshot_seq, to_dir, dir, after, exec, older_than, instance, attempt, since,
      unsuspect_seq, html;
  std::optional<int> rank;  // restore: the node's part of a group snapshot
  std::vector<std::string> files;
  bool json = false, once = false, use_store = false, force = false, follow = false;
  bool break_claims = false;
};

void AddExtraOptions(CLI::App* sub, std::string_view name, Invocation& inv, ExtraOptions& x) {
  if (name == "run") {
    sub->add_flag("--print-config", inv.print_config,
                  "Print the effective config (secrets redacted) and exit");
    sub->add_option("command", inv.command_args, "The trainer's command, after --")
        ->type_name("CMD ARGS...");
  } else if (name == "restore") {
    sub->add_option("--snapshot", x.snapshot_seq, "Restore this snapshot instead of the newest")
        ->type_name("SEQ");
    sub->add_option("--to", x.to_dir, "Restore into DIR instead of the checkpoint dir")
        ->type_name("DIR");
    sub->add_option("--rank", x.rank,
                    "With nodes > 1: restore this node rank's part of the group snapshot")
        ->type_name("N");
    sub->add_flag("--force", x.force,
                  "Let the snapshot replace files of the same name that spotguard did not "
                  "restore; they are kept in DIR.spotguard-backup-<time>");
  } else if (name == "snapshot") {
    sub->add_option("--dir", x.dir, "Capture this directory")->type_name("DIR");
    sub->add_option("files", x.files, "Capture these files")->type_name("FILE...");
  } else if (name == "unsuspect") {
    sub->add_option("seq", x.unsuspect_seq, "The snapshot, as `spotguard ls` shows it")
        ->type_name("SEQ")
        ->required();
  } else if (name == "ls" || name == "status") {
    sub->add_flag("--json", x.json, "Machine-readable output");
  } else if (name == "logs") {
    sub->add_option("--instance", x.instance, "Every attempt that ran on this instance")
        ->type_name("ID");
    sub->add_option("--attempt", x.attempt,
                    "This attempt (the lease generation, as `#N` in the output)")
        ->type_name("N");
    sub->add_option("--since", x.since, "Only lines no older than this (e.g. 10m)")
        ->type_name("DUR");
    sub->add_flag("--follow", x.follow, "Keep printing segments as they are shipped");
    sub->add_flag("--json", x.json, "One JSON object per line");
  } else if (name == "report") {
    sub->add_option("--since", x.since, "Only attempts that ran in the last DUR (e.g. 7d)")
        ->type_name("DUR");
    sub->add_flag("--json", x.json, "Machine-readable output");
    sub->add_option("--html", x.html, "Also write a self-contained page with the timeline")
        ->type_name("FILE");
  } else if (name == "verify") {
    sub->add_option("--snapshot", x.snapshot_seq, "Verify this snapshot instead of the newest")
        ->type_name("SEQ");
  } else if (name == "watch") {
    sub->add_flag("--json", x.json, "Print events as JSON lines");
    sub->add_flag("--once", x.once, "Exit 0 after the first interruption notice");
    sub->add_option("--exec", x.exec,
                    "Run `/bin/sh -c CMD` on each event (event JSON on stdin and in "
                    "SPOTGUARD_EVENT)")
        ->type_name("CMD");
  } else if (name == "gc") {
    sub->add_option("--older-than", x.older_than,
                    "Unfinished snapshots and uploads older than this are abandoned (default 1h), "
                    "unless their writer's claim is live (renewed in the last 10m)")
        ->type_name("DUR");
    sub->add_flag("--break-claims", x.break_claims,
                  "Take every writer for dead, live claims too: only when no agent or "
                  "snapshot of the job is running (e.g. right after a crash)");
  } else if (name == "drill") {
    sub->add_option("--after", x.after, "Inject the interruption after this long (default 20s)")
        ->type_name("DUR");
    sub->add_flag("--use-store", x.use_store,
                  "Use the configured store instead of a private temporary file:// store");
    sub->add_option("command", inv.command_args, "The trainer's command, after --")
        ->type_name("CMD ARGS...");
  }
}

void PrintProblems(const std::vector<ConfigProblem>& problems) {
  std::cerr << "spotguard: the configuration has " << problems.size()
            << (problems.size() == 1 ? " problem" : " problems") << "; nothing was started:\n";
  for (const ConfigProblem& p : problems) std::cerr << "  " << p.message << "\n";
}

int NotBuiltYet(std::string_view name) {
  std::cerr << "spotguard " << name << ": not implemented in spotguard " << kVersion
            << " yet; nothing was done\n";
  return kExitFailure;
}

// A duration flag's value: false, with the problem said, when `text` is
// not a duration; `out` is left as it was when `text` is empty.
bool ReadDurationFlag(std::string_view command, std::string_view flag, const std::string& text,
                      std::optional<Duration>& out) {
  if (text.empty()) return true;
  auto d = ParseDuration(text);
  if (!d.ok()) {
    std::cerr << "spotguard " << command << ": " << flag << " " << d.status().message() << "\n";
    return false;
  }
  out = *d;
  return true;
}

int RunDrillFromCli(const Config& config, const std::map<std::string, std::string>& env,
                    const ExtraOptions& extra) {
  DrillOptions drill;
  drill.use_configured_store = extra.use_store;
  std::optional<Duration> after;
  if (!ReadDurationFlag("drill", "--after", extra.after, after)) return kExitUsage;
  if (after) drill.after = *after;
  return RunDrillCommand(config, env, drill);
}

int RunGcFromCli(const Config& config, const std::map<std::string, std::string>& env,
                 const ExtraOptions& extra) {
  std::optional<Duration> d;
  if (!ReadDurationFlag("gc", "--older-than", extra.older_than, d)) return kExitUsage;
  std::optional<std::chrono::seconds> older_than;
  if (d) older_than = std::chrono::duration_cast<std::chrono::seconds>(*d);
  return RunGcCommand(config, env, older_than, extra.break_claims);
}

int RunLogsFromCli(const Config& config, const std::map<std::string, std::string>& env,
                   const ExtraOptions& extra) {
  LogsOptions logs;
  logs.json = extra.json;
  logs.follow = extra.follow;
  if (!extra.instance.empty()) logs.instance = extra.instance;
  if (!extra.attempt.empty()) {
    logs.attempt = ParseSeqArgument(extra.attempt);
    if (!logs.attempt) {
      std::cerr << "spotguard logs: --attempt \"" << extra.attempt
                << "\" is not an attempt number (digits, as `#N` in the output)\n";
      return kExitUsage;
    }
  }
  std::optional<Duration> since;
  if (!ReadDurationFlag("logs", "--since", extra.since, since)) return kExitUsage;
  if (since) logs.since = *since;
  return RunLogsCommand(config, env, logs);
}

int RunReportFromCli(const Config& config, const std::map<std::string, std::string>& env,
                     const ExtraOptions& extra) {
  ReportOptions report{extra.json, extra.html, std::nullopt};
  std::optional<Duration> since;
  if (!ReadDurationFlag("report", "--since", extra.since, since)) return kExitUsage;
  if (since) report.since = std::chrono::duration_cast<std::chrono::milliseconds>(*since);
  return RunReportCommand(config, env, report);
}

// Runs subcommand `name` with its loaded config and its own flags.
int Dispatch(std::string_view name, const Config& config,
             const std::map<std::string, std::string>& env, const ExtraOptions& extra) {
  if (name == "watch") {
    return RunWatch(config,
                    WatchOptions{.json = extra.json, .once = extra.once, .exec = extra.exec}, env);
  }
  std::optional<uint64_t> seq;
  if (!extra.snapshot_seq.empty()) {
    seq = ParseSeqArgument(extra.snapshot_seq);
    if (!seq) {
      std::cerr << "spotguard " << name << ": --snapshot \"" << extra.snapshot_seq
                << "\" is not a snapshot seq (digits, as `spotguard ls` shows them)\n";
      return kExitUsage;
    }
  }
  if (name == "run") return RunAgentCommand(config, env);
  if (name == "drill") return RunDrillFromCli(config, env, extra);
  if (name == "snapshot") return RunSnapshotCommand(config, env, {extra.dir, extra.files});
  if (name == "restore") {
    return RunRestoreCommand(config, env, {seq, extra.to_dir, extra.force, extra.rank});
  }
  if (name == "ls") return RunLsCommand(config, env, extra.json);
  if (name == "verify") return RunVerifyCommand(config, env, seq);
  if (name == "gc") return RunGcFromCli(config, env, extra);
  if (name == "status") return RunStatusCommand(config, env, extra.json);
  if (name == "unsuspect") return RunUnsuspectCommand(config, env, extra.unsuspect_seq);
  if (name == "logs") return RunLogsFromCli(config, env, extra);
  if (name == "doctor") return RunDoctorCommand(config, env);
  if (name == "reset-failure") return RunResetFailureCommand(config, env);
  if (name == "report") return RunReportFromCli(config, env, extra);
  return NotBuiltYet(name);
}

}  // namespace

int RunCli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  InitLogging(LogLevel::kInfo, LogFormat::kText);

  CLI::App app{"spotguard keeps a long training job alive across spot instances.", "spotguard"};
  app.set_version_flag("--version", std::string("spotguard ") + kVersion);
  app.require_subcommand(1);
  app.footer(kExitCodesHelp);

  Invocation inv;
  ExtraOptions extra;
  std::map<std::string, CLI::App*> subs;
  for (const Subcommand& s : kSubcommands) {
    CLI::App* sub = app.add_subcommand(s.name, s.description);
    AddCommonOptions(sub, inv);
    AddExtraOptions(sub, s.name, inv, extra);
    sub->footer(kExitCodesHelp);
    subs[s.name] = sub;
  }

  std::vector<std::string> reversed(args.size() > 1 ? args.begin() + 1 : args.end(), args.end());
  std::reverse(reversed.begin(), reversed.end());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, the version or the error
    return code == 0 ? kExitOk : kExitUsage;
  }

  const Subcommand* chosen = nullptr;
  for (const Subcommand& s : kSubcommands) {
    if (subs[s.name]->parsed()) chosen = &s;
  }
  if (chosen == nullptr) return kExitUsage;  // require_subcommand makes this unreachable

  ConfigSources sources;
  sources.env = env;
  sources.flags = inv.flags;
  sources.command_args = inv.command_args;
  if (inv.config_file) {
    sources.file = inv.config_file;
  } else if (auto it = env.find("SPOTGUARD_CONFIG"); it != env.end() && !it->second.empty()) {
    sources.file = it->second;
  }
  ConfigNeeds needs = chosen->needs;
  if (inv.print_config) needs = {};  // show what is there, even if incomplete
  ConfigResult loaded = LoadConfig(sources, needs);
  if (!loaded.ok()) {
    PrintProblems(loaded.problems);
    return kExitUsage;
  }
  const Config& config = loaded.config;
  InitLogging(config.log_level, config.log_format);

  if (inv.print_config) {
    std::cout << ConfigToJson(config, /*redact=*/true).dump(2) << "\n";
    return kExitOk;
  }
  return Dispatch(chosen->name, config, env, extra);
}

}  // namespace sg
