#include "common/aws_credentials.h"

#include <ctime>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "common/log.h"
#include "common/strings.h"
#include "common/sts_web_identity.h"

namespace sg {
namespace {

constexpr auto kRefreshBefore = std::chrono::minutes(5);

}  // namespace

StatusOr<Clock::WallTime> ParseIso8601(const std::string& text) {
  std::tm tm{};
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return Status::InvalidArgument("\"" + text + "\" is not an ISO 8601 time");
  if (*rest == '.') {
    ++rest;
    while (*rest >= '0' && *rest <= '9') ++rest;
  }
  const std::string zone(rest);
  if (zone != "Z" && zone != "+00:00" && zone != "") {
    return Status::InvalidArgument("\"" + text + "\" is not in UTC");
  }
  auto t = WallTimeFromUtc(tm);
  if (!t) return Status::InvalidArgument("\"" + text + "\" is outside the years 1970..2200");
  return *t;
}

StatusOr<TimedCredentials> ParseCredentialsJson(const std::string& body,
                                                const std::string& source) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::Corruption(source + " returned credentials that are not JSON");
  TimedCredentials out;
  out.source = source;
  auto field = [&](const char* name) -> std::string {
    auto it = j.find(name);
    return it != j.end() && it->is_string() ? it->get<std::string>() : "";
  };
  if (auto code = field("Code"); !code.empty() && code != "Success") {
    return Status::Unavailable(source + " answered Code=" + code);
  }
  out.credentials.access_key_id = field("AccessKeyId");
  out.credentials.secret_access_key = field("SecretAccessKey");
  out.credentials.session_token = field("Token");
  if (out.credentials.access_key_id.empty() || out.credentials.secret_access_key.empty()) {
    return Status::Corruption(source +
                              " returned credentials without AccessKeyId or "
                              "SecretAccessKey");
  }
  if (auto exp = field("Expiration"); !exp.empty()) {
    SG_ASSIGN_OR_RETURN(Clock::WallTime t, ParseIso8601(exp));
    out.expiration = t;
  }
  return out;
}

StatusOr<TimedCredentials> ParseSharedCredentials(const std::string& text,
                                                  const std::string& profile) {
  TimedCredentials out;
  out.source = "profile " + profile;
  bool in_profile = false, found = false;
  for (const std::string& raw : Split(text, '\n')) {
    std::string_view line = Trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      std::string_view name = Trim(line.substr(1, line.find(']') - 1));
      if (name.starts_with("profile ")) name = Trim(name.substr(8));
      in_profile = name == profile;
      found |= in_profile;
      continue;
    }
    if (!in_profile) continue;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string key = ToLower(Trim(line.substr(0, eq)));
    const std::string value(Trim(line.substr(eq + 1)));
    if (key == "aws_access_key_id") out.credentials.access_key_id = value;
    if (key == "aws_secret_access_key") out.credentials.secret_access_key = value;
    if (key == "aws_session_token") out.credentials.session_token = value;
  }
  if (!found) return Status::NotFound("no profile [" + profile + "] in the credentials file");
  if (out.credentials.access_key_id.empty() || out.credentials.secret_access_key.empty()) {
    return Status::InvalidArgument("profile [" + profile +
                                   "] lacks aws_access_key_id or aws_secret_access_key");
  }
  return out;
}

DefaultCredentialsChain::DefaultCredentialsChain(std::map<std::string, std::string> env,
                                                 HttpTransport& transport, Clock& clock,
                                                 MetadataService* imds)
    : env_(std::move(env)), transport_(transport), clock_(clock), imds_(imds) {}

StatusOr<AwsCredentials> DefaultCredentialsChain::Get() {
  std::lock_guard<std::mutex> lock(mu_);
  const bool fresh =
      cached_ && (!cached_->expiration || clock_.Now() + kRefreshBefore < *cached_->expiration);
  if (!fresh) {
    auto resolved = Resolve();
    if (!resolved.ok()) {
      // Keep using credentials that have not expired yet if renewal fails.
      if (cached_ && cached_->expiration && clock_.Now() < *cached_->expiration) {
        LogWarn(
            "renewing AWS credentials from {} failed ({}); the current ones stay valid "
            "for now",
            cached_->source, resolved.status().message());
        return cached_->credentials;
      }
      return resolved.status();
    }
    if (!cached_ || cached_->source != resolved->source) {
      LogInfo("using AWS credentials from {}", resolved->source);
    }
    cached_ = std::move(*resolved);
  }
  return cached_->credentials;
}

std::string DefaultCredentialsChain::source() {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_ ? cached_->source : "";
}

StatusOr<TimedCredentials> DefaultCredentialsChain::Resolve() {
  const std::string key_id = EnvOr(env_, "AWS_ACCESS_KEY_ID");
  const std::string secret = EnvOr(env_, "AWS_SECRET_ACCESS_KEY");
  if (!key_id.empty() || !secret.empty()) {
    if (key_id.empty() || secret.empty()) {
      return Status::InvalidArgument(
          "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together");
    }
    TimedCredentials c;
    c.credentials = {key_id, secret, EnvOr(env_, "AWS_SESSION_TOKEN")};
    c.source = "environment";
    return c;
  }

  // Web identity (EKS IRSA, OIDC federation) comes next, as in the AWS tools.
  if (auto web = WebIdentityFromEnv(
          env_, std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch())
                    .count())) {
    if (!web->ok()) return web->status();
    return FetchWebIdentityCredentials(**web, transport_);
  }

  const std::string file = EnvOr(env_, "AWS_SHARED_CREDENTIALS_FILE",
                                 EnvOr(env_, "HOME", "/root") + "/.aws/credentials");
  const std::string profile = EnvOr(env_, "AWS_PROFILE", "default");
  if (auto text = ReadFileToString(file); text.ok()) {
    auto parsed = ParseSharedCredentials(*text, profile);
    // A profile asked for by name must exist; the default one may not.
    if (parsed.ok() || env_.count("AWS_PROFILE")) return parsed;
  } else if (env_.count("AWS_PROFILE")) {
    return Status::NotFound("AWS_PROFILE=" + profile + " but " + file +
                            " cannot be read: " + text.status().message());
  }

  if (env_.count("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") ||
      env_.count("AWS_CONTAINER_CREDENTIALS_FULL_URI")) {
    return FromContainer();
  }
  if (ToLower(EnvOr(env_, "AWS_EC2_METADATA_DISABLED")) != "true" && imds_ != nullptr) {
    return FromInstanceRole();
  }
  return Status::NotFound(
      "no AWS credentials: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run "
      "with an instance role or container credentials");
}

StatusOr<TimedCredentials> DefaultCredentialsChain::FromContainer() {
  HttpRequest req;
  if (auto rel = EnvOr(env_, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); !rel.empty()) {
    req.url = "http://169.254.170.2" + rel;
  } else {
    req.url = EnvOr(env_, "AWS_CONTAINER_CREDENTIALS_FULL_URI");
  }
  std::string token = EnvOr(env_, "AWS_CONTAINER_AUTHORIZATION_TOKEN");
  if (auto token_file = EnvOr(env_, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
      !token_file.empty()) {
    SG_ASSIGN_OR_RETURN(std::string t, ReadFileToString(token_file));
    token = std::string(Trim(t));
  }
  if (!token.empty()) req.headers.emplace_back("Authorization", token);
  req.timeout = std::chrono::seconds(2);
  req.no_proxy = true;
  SG_ASSIGN_OR_RETURN(HttpResponse resp, transport_.Send(req));
  if (resp.status != 200) {
    return Status::Unavailable("container credentials endpoint answered HTTP " +
                               std::to_string(resp.status));
  }
  return ParseCredentialsJson(resp.body, "container");
}

StatusOr<TimedCredentials> DefaultCredentialsChain::FromInstanceRole() {
  auto roles = imds_->Get("meta-data/iam/security-credentials/");
  if (!roles.ok()) {
    return Status(roles.status().code(),
                  "no instance role credentials: " + roles.status().message());
  }
  const std::string role(Trim(Split(*roles, '\n').front()));
  if (role.empty()) return Status::NotFound("the instance has no IAM role");
  SG_ASSIGN_OR_RETURN(std::string body, imds_->Get("meta-data/iam/security-credentials/" + role));
  return ParseCredentialsJson(body, "instance role " + role);
}

}  // namespace sg
