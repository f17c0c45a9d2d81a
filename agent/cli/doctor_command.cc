// `spotguard doctor` (agent/cli/doctor_command.h): credentials, the store, the
// metadata service, the clock and the disk, each checked and judged.
#include "agent/cli/doctor_command.h"

#include <sys/statvfs.h>

#include <filesystem>
#include <iostream>

#include "agent/cli/doctor_checks.h"
#include "agent/config/exit_codes.h"
#include "agent/repo/progress.h"
#include "agent/repo/snapshot_catalog.h"
#include "agent/repo/open_store.h"
#include "agent/repo/store_names.h"
#include "agent/repo/repository.h"
#include "common/aws_credentials.h"
#include "common/files.h"
#include "common/http.h"
#include "common/store_url.h"

namespace sg {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kRestoreMargin = 64ull << 20;  // what restore keeps free beyond the snapshot

using doctor_detail::Fail;
using doctor_detail::Ok;
using doctor_detail::Warn;

std::string MaskedKeyId(const std::string& id) {
  if (id.size() <= 4) return "****";
  return "****" + id.substr(id.size() - 4);
}

std::string ConfiguredImdsEndpoint(const Config& config) {
  return config.imds.endpoint == kDefaultImdsEndpoint ? "" : config.imds.endpoint;
}

DoctorCheck CheckCredentials(const Config& config, AwsEnvironment& aws) {
  auto url = ParseStoreUrl(config.store);
  if (url.ok() && url->scheme == StoreUrl::Scheme::kFile) {
    return Ok("credentials", "not needed for a file:// store");
  }
  DefaultCredentialsChain& chain = aws.credentials();
  auto creds = chain.Get();
  if (!creds.ok()) {
    return Fail("credentials",
                "no AWS credentials found (environment, AWS_PROFILE, container, "
                "instance role): " +
                    creds.status().message());
  }
  return Ok("credentials", "from " + chain.source() + ", access key " +
                               MaskedKeyId(creds->access_key_id) +
                               (creds->session_token.empty() ? "" : ", temporary"));
}

}  // namespace

std::string FormatCheck(const DoctorCheck& c) {
  const char* state = c.state == CheckState::kOk     ? "ok  "
                      : c.state == CheckState::kWarn ? "warn"
                                                     : "FAIL";
  return std::string(state) + "  " + c.name + ": " + c.detail;
}

DoctorCheck JudgeClockSkew(std::chrono::seconds skew) {
  const int64_t s = skew.count();
  const int64_t abs = s < 0 ? -s : s;
  const std::string where = s == 0 ? "" : (s > 0 ? " ahead of" : " behind");
  const std::string text =
      s == 0 ? "the store's clock agrees with ours (within a second)"
             : "the store's clock is " + std::to_string(abs) + "s" + where + " this machine's";
  if (abs > 300) {
    return Fail("clock", text +
                             "; fix this machine's time (chrony/NTP): requests more than 15 "
                             "minutes off are refused and heartbeats read wrong");
  }
  if (abs > 60) return Warn("clock", text + "; check this machine's time sync (chrony/NTP)");
  return Ok("clock", text);
}

DoctorCheck JudgeFreeSpace(const std::string& dir, uint64_t free_bytes,
                           std::optional<uint64_t> newest) {
  std::string text = HumanBytes(free_bytes) + " free in " + dir;
  if (newest) text += "; the newest snapshot holds " + HumanBytes(*newest);
  if (newest && free_bytes < *newest + kRestoreMargin) {
    return Fail("disk", text + ": a restore of it would not fit");
  }
  if (free_bytes < 10 * kGiB) return Warn("disk", text + " (under 10 GiB)");
  if (newest && free_bytes < 2 * *newest) {
    return Warn("disk", text +
                            " (under twice that: a checkpoint and a restore side by side "
                            "may not fit)");
  }
  return Ok("disk", text);
}

DoctorCheck CheckFreeSpace(const std::string& dir, std::optional<uint64_t> newest) {
  if (dir.empty()) {
    return Warn("disk", "checkpoint_dir is not set (--checkpoint-dir); free space not checked");
  }
  namespace fs = std::filesystem;
  fs::path probe = dir;
  std::error_code ec;
  while (!fs::exists(probe, ec) && probe.has_parent_path() && probe != probe.parent_path()) {
    probe = probe.parent_path();
  }
  struct statvfs st {};
  if (::statvfs(probe.c_str(), &st) != 0) {
    return Fail("disk", Status::FromErrno(errno, "statvfs " + probe.string()).message());
  }
  const uint64_t free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  DoctorCheck c = JudgeFreeSpace(dir, free_bytes, newest);
  if (probe != fs::path(dir))
    c.detail += " (" + dir + " does not exist yet; measured " + probe.string() + ")";
  return c;
}

DoctorCheck CheckImds(HttpTransport& transport, Clock& clock, const ImdsClient::Options& options) {
  if (options.disabled) {
    return Warn("imds",
                "AWS_EC2_METADATA_DISABLED=true: not on EC2 or IMDS disabled; "
                "interruption notices cannot be seen");
  }
  HttpRequest token;
  token.method = "PUT";
  token.url = options.endpoint + "/latest/api/token";
  token.headers = {{"X-aws-ec2-metadata-token-ttl-seconds", "60"}};
  token.timeout = options.timeout;
  token.connect_timeout = options.timeout;
  token.no_proxy = true;
  auto resp = transport.Send(token);
  if (!resp.ok()) {
    // The service answers the token PUT with an IP TTL of the instance's
    // hop limit: from a container behind a bridge (one hop more) a limit of
    // 1 drops that answer, while GETs still get through (docs/agent.md,
    // "Metadata from a container").
    HttpRequest probe;
    probe.url = options.endpoint + "/latest/meta-data/";
    probe.timeout = options.timeout;
    probe.connect_timeout = options.timeout;
    probe.no_proxy = true;
    if (auto get = transport.Send(probe); get.ok()) {
      return Warn("imds",
                  "the IMDSv2 token request to " + options.endpoint +
                      " got no answer, but a GET there answered HTTP " +
                      std::to_string(get->status) +
                      ": the instance's metadata hop limit is 1 and this runs in a container "
                      "with bridge networking, so the token's answer is dropped. Set the launch "
                      "template's MetadataOptions: HttpPutResponseHopLimit: 2 (with HttpTokens: "
                      "required, HttpEndpoint: enabled). Interruption notices cannot be seen "
                      "until then; SIGTERM still gets a snapshot");
    }
    return Warn("imds", "no answer at " + options.endpoint +
                            ": not on EC2 or IMDS disabled (the launch template's "
                            "MetadataOptions: HttpEndpoint: enabled turns it on; in a container, "
                            "HttpPutResponseHopLimit: 2 lets the token through); " +
                            resp.status().message());
  }
  if (resp->status == 403) {
    return Warn("imds", options.endpoint +
                            " answered 403 to the IMDSv2 token request: not on EC2 or IMDS "
                            "disabled (turned off for the instance: set the launch template's "
                            "MetadataOptions: HttpEndpoint: enabled; or a proxy answered)");
  }
  if (resp->status != 200 || resp->body.empty()) {
    return Fail("imds", options.endpoint + " answered HTTP " + std::to_string(resp->status) +
                            " to the IMDSv2 token request: IMDSv2 does not work there");
  }
  ImdsClient::Options client_options = options;
  client_options.max_attempts = 2;
  ImdsClient imds(transport, clock, client_options);
  auto identity = ReadInstanceIdentity(imds);
  if (!identity.ok()) {
    return Fail("imds", "IMDSv2 token from " + options.endpoint +
                            ", but the identity document failed: " + identity.status().message());
  }
  return Ok("imds", "IMDSv2 at " + options.endpoint + ": instance " + identity->instance_id + " (" +
                        identity->instance_type + ", " + identity->availability_zone +
                        (identity->life_cycle.empty() ? "" : ", " + identity->life_cycle) + ")");
}

std::vector<DoctorCheck> RunDoctorChecks(const Config& config,
                                         const std::map<std::string, std::string>& env,
                                         const std::function<void(const DoctorCheck&)>& on_check) {
  std::vector<DoctorCheck> checks;
  auto add = [&](DoctorCheck c) {
    if (on_check) on_check(c);
    checks.push_back(std::move(c));
  };
  // One transport, IMDS client and credentials chain for every check, as
  // `run` has: the credentials found here are the ones the store uses.
  std::shared_ptr<AwsEnvironment> aws = OpenAws(config, env);
  add(CheckCredentials(config, *aws));

  std::optional<uint64_t> newest_bytes;
  auto store = OpenStore(config, env, aws, StoreUse::kInteractive);
  if (!store.ok()) {
    add(Fail("store", "cannot open " + config.store + ": " + store.status().message()));
    for (const char* name : {"write", "create-only", "if-match", "clock"}) {
      add(Fail(name, "not run: the store could not be opened"));
    }
  } else {
    bool listed = false;
    for (DoctorCheck& c : CheckStore(**store, config.job, SystemClock())) {
      if (c.name == "store") listed = c.state == CheckState::kOk;
      add(std::move(c));
    }
    if (listed && !config.job.empty()) {
      SnapshotCatalog catalog = Repository::Open(**store, config.job).Catalog();
      auto seqs = catalog.Committed();
      if (seqs.ok() && !seqs->empty()) {
        auto m = catalog.ReadManifest(seqs->front());
        if (m.ok()) newest_bytes = m->TotalSize();
      }
    }
  }

  add(CheckImds(aws->transport(), SystemClock(),
                ImdsOptionsFromEnvironment(ConfiguredImdsEndpoint(config), env)));
  add(CheckFreeSpace(config.checkpoint_dir, newest_bytes));
  return checks;
}

int RunDoctorCommand(const Config& config, const std::map<std::string, std::string>& env) {
  int ok = 0, warn = 0, fail = 0;
  RunDoctorChecks(config, env, [&](const DoctorCheck& c) {
    std::cout << FormatCheck(c) << std::endl;
    (c.state == CheckState::kOk ? ok : c.state == CheckState::kWarn ? warn : fail)++;
  });
  std::cout << "doctor: " << ok << " ok, " << warn << " warn, " << fail << " FAIL" << std::endl;
  return fail == 0 ? kExitOk : kExitFailure;
}

}  // namespace sg
