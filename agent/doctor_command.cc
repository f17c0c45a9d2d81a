#include "agent/doctor_command.h"

#include <sys/statvfs.h>

#include <filesystem>
#include <iostream>

#include "agent/exit_codes.h"
#include "agent/progress.h"
#include "agent/snapshot_catalog.h"
#include "agent/snapshot_commands.h"
#include "agent/store_layout.h"
#include "common/aws_credentials.h"
#include "common/files.h"
#include "common/http.h"
#include "common/store_url.h"

namespace sg {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kRestoreMargin = 64ull << 20;  // what restore keeps free beyond the snapshot

DoctorCheck Ok(std::string name, std::string detail) {
  return {std::move(name), CheckState::kOk, std::move(detail)};
}
DoctorCheck Warn(std::string name, std::string detail) {
  return {std::move(name), CheckState::kWarn, std::move(detail)};
}
DoctorCheck Fail(std::string name, std::string detail) {
  return {std::move(name), CheckState::kFail, std::move(detail)};
}

// Probe objects of one doctor run, under a prefix no one else writes.
class StoreProbe {
 public:
  StoreProbe(ObjectStore& store, const std::string& job, Clock& clock)
      : store_(store),
        clock_(clock),
        job_prefix_(job.empty() ? "" : JobPrefix(job)),
        prefix_(job_prefix_ + ".doctor/" + RandomHex(6) + "/") {}

  DoctorCheck Reachable() {
    auto page = store_.List(job_prefix_, "", 1);
    if (!page.ok()) {
      silent_ = page.status().reason() == kNoAnswerReason;
      return Fail("store", "cannot list " + Where() + ": " + page.status().message());
    }
    return Ok("store",
              "listed " + Where() +
                  (page->objects.empty() ? " (nothing there yet)" : " (the job has objects)"));
  }

  DoctorCheck WriteAndDelete() {
    const std::string key = prefix_ + "write";
    const std::string data = "spotguard doctor write probe " + RandomHex(4);
    auto put = store_.Put(key, data, PutCondition::None());
    if (!put.ok()) return Fail("write", "cannot write " + key + ": " + put.status().message());
    auto back = store_.Get(key);
    if (!back.ok()) {
      Forget(key);
      return Fail("write", "wrote " + key + " but cannot read it back: " + back.status().message());
    }
    if (*back != data) {
      Forget(key);
      return Fail("write", "read back different bytes from " + key);
    }
    if (Status st = store_.Delete(key); !st.ok()) {
      return Fail("write", "wrote " + key + " but cannot delete it: " + st.message());
    }
    auto head = store_.Head(key);
    if (head.ok()) return Fail("write", "deleted " + key + " but it is still there");
    if (!head.status().Is(StatusCode::kNotFound)) {
      return Fail("write", "after deleting " + key + ": " + head.status().message());
    }
    return Ok("write", "put, read back and deleted a probe object under " + prefix_);
  }

  DoctorCheck CreateOnly() {
    const std::string key = prefix_ + "create-only";
    auto first = store_.Put(key, "first", PutCondition::CreateOnly());
    if (!first.ok()) {
      return Fail("create-only",
                  "a create-only write of a new key failed: " + first.status().message());
    }
    auto second = store_.Put(key, "second", PutCondition::CreateOnly());
    DoctorCheck result;
    if (second.ok()) {
      result = Fail("create-only",
                    "a second create-only write of the same key SUCCEEDED: the store ignores "
                    "If-None-Match: *, so two instances could both take the lease or commit the "
                    "same snapshot; use a store that honours conditional writes");
    } else if (!second.status().Is(StatusCode::kPreconditionFailed)) {
      result = Fail("create-only",
                    "the second create-only write failed, but not with "
                    "PreconditionFailed: " +
                        second.status().message());
    } else if (auto now = store_.Get(key); !now.ok() || *now != "first") {
      result = Fail("create-only", "the refused create-only write still changed the object");
    } else {
      result = Ok("create-only",
                  "a second create-only write of one key was refused "
                  "(PreconditionFailed)");
    }
    Forget(key);
    return result;
  }

  DoctorCheck IfMatch() {
    const std::string key = prefix_ + "if-match";
    auto v1 = store_.Put(key, "v1", PutCondition::None());
    if (!v1.ok()) return Fail("if-match", "cannot write " + key + ": " + v1.status().message());
    DoctorCheck result;
    auto v2 = store_.Put(key, "v2", PutCondition::IfMatch(*v1));
    if (!v2.ok()) {
      result = Fail("if-match",
                    "a write with the object's current etag was refused: " + v2.status().message());
    } else if (auto stale = store_.Put(key, "v3", PutCondition::IfMatch(*v1)); stale.ok()) {
      result = Fail("if-match",
                    "a write with a STALE etag succeeded: the store ignores If-Match, so a "
                    "fenced instance could overwrite the lease of the one that took over");
    } else if (!stale.status().Is(StatusCode::kPreconditionFailed)) {
      result = Fail("if-match",
                    "a write with a stale etag failed, but not with "
                    "PreconditionFailed: " +
                        stale.status().message());
    } else if (auto now = store_.Get(key); !now.ok() || *now != "v2") {
      result = Fail("if-match", "the refused If-Match write still changed the object");
    } else {
      result = Ok("if-match", "the current etag is accepted and a stale one refused");
    }
    Forget(key);
    return result;
  }

  DoctorCheck ClockSkew() {
    const std::string key = prefix_ + "clock";
    const auto before = clock_.Now();
    auto put = store_.Put(key, "clock", PutCondition::None());
    const auto after = clock_.Now();
    if (!put.ok()) {
      return Fail("clock",
                  "cannot write a probe object to compare clocks: " + put.status().message());
    }
    auto head = store_.Head(key);
    Forget(key);
    if (!head.ok()) {
      return Fail("clock", "cannot read the probe object's time: " + head.status().message());
    }
    if (head->modified == Clock::WallTime{}) {
      return Warn("clock", "the store gave no modification time; skew not measured");
    }
    // S3 keeps whole seconds; anything within the request's own window is no skew.
    const auto tolerance = std::chrono::seconds(1);
    std::chrono::seconds skew{0};
    if (head->modified < before - tolerance) {
      skew = std::chrono::duration_cast<std::chrono::seconds>(head->modified - before);
    } else if (head->modified > after + tolerance) {
      skew = std::chrono::duration_cast<std::chrono::seconds>(head->modified - after);
    }
    return JudgeClockSkew(skew);
  }

  // The listing got no answer at all (docs/design.md §12): the other
  // probes would only wait as long again each.
  bool silent() const { return silent_; }

  // Deletes the probe objects; returns those that are left.
  std::vector<std::string> CleanUp() {
    std::vector<std::string> left;
    for (const std::string& key : written_) {
      if (!store_.Delete(key).ok()) left.push_back(key);
    }
    auto rest = ListAll(store_, prefix_);
    if (rest.ok()) {
      for (const ObjectInfo& o : *rest) {
        if (!store_.Delete(o.key).ok()) left.push_back(o.key);
      }
    }
    return left;
  }

 private:
  std::string Where() const {
    return store_.Describe() + "/" + (job_prefix_.empty() ? "" : job_prefix_);
  }
  // Deletes now, and again at CleanUp if that fails.
  void Forget(const std::string& key) {
    if (!store_.Delete(key).ok()) written_.push_back(key);
  }

  ObjectStore& store_;
  Clock& clock_;
  const std::string job_prefix_;
  const std::string prefix_;
  std::vector<std::string> written_;
  bool silent_ = false;
};

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

std::vector<DoctorCheck> CheckStore(ObjectStore& store, const std::string& job, Clock& clock) {
  StoreProbe probe(store, job, clock);
  std::vector<DoctorCheck> checks;
  checks.push_back(probe.Reachable());
  if (probe.silent()) {
    for (const char* name : {"write", "create-only", "if-match", "clock"}) {
      checks.push_back(Fail(name, "not run: the store does not answer"));
    }
    return checks;
  }
  checks.push_back(probe.WriteAndDelete());
  checks.push_back(probe.CreateOnly());
  checks.push_back(probe.IfMatch());
  checks.push_back(probe.ClockSkew());
  if (auto left = probe.CleanUp(); !left.empty()) {
    checks.push_back(Warn("cleanup", "could not delete " + std::to_string(left.size()) +
                                         " probe object(s), e.g. " + left.front() +
                                         "; delete them by hand"));
  }
  return checks;
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
      SnapshotCatalog catalog(**store, config.job);
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
