// Where AWS credentials come from, in the order the AWS tools use:
//   1. AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN
//   2. web identity: AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, exchanged
//      with STS AssumeRoleWithWebIdentity (EKS IRSA; common/sts_web_identity.h)
//   3. AWS_PROFILE (default "default") in AWS_SHARED_CREDENTIALS_FILE
//      (default ~/.aws/credentials)
//   4. container credentials: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI on
//      http://169.254.170.2, or AWS_CONTAINER_CREDENTIALS_FULL_URI with
//      AWS_CONTAINER_AUTHORIZATION_TOKEN or _TOKEN_FILE
//   5. the instance role through IMDSv2 (unless AWS_EC2_METADATA_DISABLED=true)
// Temporary credentials are renewed 5 minutes before they expire. Secrets
// never appear in a log line or an error message.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/http.h"
#include "common/imds_client.h"
#include "common/sigv4.h"
#include "common/status.h"

namespace sg {

class CredentialsProvider {
 public:
  virtual ~CredentialsProvider() = default;
  virtual StatusOr<AwsCredentials> Get() = 0;
};

class StaticCredentials final : public CredentialsProvider {
 public:
  explicit StaticCredentials(AwsCredentials c) : creds_(std::move(c)) {}
  StatusOr<AwsCredentials> Get() override { return creds_; }

 private:
  AwsCredentials creds_;
};

// Credentials with the time they stop working (nullopt: never).
struct TimedCredentials {
  AwsCredentials credentials;
  std::optional<Clock::WallTime> expiration;
  std::string source;  // "environment", "profile default", "container", "instance role r"
};

// Reads the JSON that container and instance-role endpoints return
// ({"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}).
StatusOr<TimedCredentials> ParseCredentialsJson(const std::string& body, const std::string& source);
// Reads [profile] from a shared credentials file's text.
StatusOr<TimedCredentials> ParseSharedCredentials(const std::string& text,
                                                  const std::string& profile);
// "2026-11-22T14:00:00Z" (fractions and "+00:00" accepted).
StatusOr<Clock::WallTime> ParseIso8601(const std::string& text);

class DefaultCredentialsChain final : public CredentialsProvider {
 public:
  // `imds` may be null (no instance role). `env` is the process environment.
  DefaultCredentialsChain(std::map<std::string, std::string> env, HttpTransport& transport,
                          Clock& clock, MetadataService* imds);
  StatusOr<AwsCredentials> Get() override;
  // Where the current credentials came from, for `doctor` and logs.
  std::string source();

 private:
  StatusOr<TimedCredentials> Resolve();
  StatusOr<TimedCredentials> FromContainer();
  StatusOr<TimedCredentials> FromInstanceRole();

  const std::map<std::string, std::string> env_;
  HttpTransport& transport_;
  Clock& clock_;
  MetadataService* imds_;
  std::mutex mu_;
  std::optional<TimedCredentials> cached_;
};

}  // namespace sg
