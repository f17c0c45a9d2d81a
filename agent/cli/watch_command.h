// `spotguard watch`: prints interruption events as they arrive (docs/design.md §2),
// for user-data scripts and for people testing their hooks.
#pragma once

#include <map>
#include <string>

#include "agent/config/config.h"

namespace sg {

struct WatchOptions {
  bool json = false;  // one JSON object per line on stdout instead of text
  bool once = false;  // exit 0 after the first notice (spot notice or lifecycle Terminated)
  // Run on each event as `/bin/sh -c exec`, with the event JSON on stdin and
  // in SPOTGUARD_EVENT; empty: no hook.
  std::string exec;
};

// Polls the metadata service at config.imds (AWS_EC2_METADATA_SERVICE_ENDPOINT
// when the config keeps the default endpoint; AWS_EC2_METADATA_DISABLED
// honoured) every config.imds.poll_interval. Returns the exit code: 0 after
// the first notice with `once`, or when stopped by SIGINT or SIGTERM; 1 when
// no metadata service answers at the start (not on EC2) or it is disabled.
// `env` is the process environment; hooks get it plus SPOTGUARD_EVENT.
int RunWatch(const Config& config, const WatchOptions& options,
             const std::map<std::string, std::string>& env);

}  // namespace sg
