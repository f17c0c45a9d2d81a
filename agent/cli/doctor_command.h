// `spotguard doctor`: checks, before a job relies on them, the things spotguard
// needs from its surroundings (docs/design.md §2): credentials, store access, the
// conditional writes that fencing and commits rely on, clock skew against the
// store, the metadata service, and disk space. Every check runs even when an
// earlier one failed; each prints one line "ok|FAIL|warn  <check>: <detail>".
// docs/operations.md says what each FAIL means and what to do.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "common/clock.h"
#include "common/http.h"
#include "common/imds_client.h"
#include "common/object_store.h"

namespace sg {

enum class CheckState { kOk, kWarn, kFail };

struct DoctorCheck {
  std::string name;  // "store", "create-only", ...
  CheckState state = CheckState::kOk;
  std::string detail;
};

// "ok    store: ...", "FAIL  create-only: ...", "warn  imds: ...".
std::string FormatCheck(const DoctorCheck& check);

// The checks that need only the store: "store" (list under the job),
// "write" (put, read back, delete), "create-only" (a second create-only put
// of one key must fail with PreconditionFailed), "if-match" (a stale etag must
// fail, the current one succeed) and "clock" (the probe object's modified time
// against `clock`). Probe objects go under "<job>/.doctor/<random>/" (".doctor/"
// without a job) and are deleted afterwards; a failed clean-up adds a
// "cleanup" warning naming what is left.
std::vector<DoctorCheck> CheckStore(ObjectStore& store, const std::string& job, Clock& clock);

// Skew of the store's clock against ours: ok up to 1 minute, warn up to 5,
// FAIL beyond (SigV4 refuses requests more than 15 minutes off, and lease
// heartbeats are read by people as times).
DoctorCheck JudgeClockSkew(std::chrono::seconds skew);

// Free space in `dir` for checkpoints and restores: FAIL when the newest
// snapshot (if known) would not fit, warn under 10 GiB or under twice the
// newest snapshot's size.
DoctorCheck JudgeFreeSpace(const std::string& dir, uint64_t free_bytes,
                           std::optional<uint64_t> newest_snapshot_bytes);
// statvfs of `dir`, or of its nearest existing parent when it does not exist yet.
DoctorCheck CheckFreeSpace(const std::string& dir, std::optional<uint64_t> newest_snapshot_bytes);

// IMDSv2 at options.endpoint: a token, then the identity document. No answer,
// a 403 to the token request or options.disabled is a warning ("not on EC2 or
// IMDS disabled"); any other error is a FAIL.
DoctorCheck CheckImds(HttpTransport& transport, Clock& clock, const ImdsClient::Options& options);

// Every check for the config's store, metadata service and checkpoint dir,
// in order; `on_check` (if set) sees each as soon as it is done.
std::vector<DoctorCheck> RunDoctorChecks(const Config& config,
                                         const std::map<std::string, std::string>& env,
                                         const std::function<void(const DoctorCheck&)>& on_check);

// Prints every check and a summary; exit code 0 when none failed, 1 otherwise.
int RunDoctorCommand(const Config& config, const std::map<std::string, std::string>& env);

}  // namespace sg
