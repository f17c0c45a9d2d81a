// Credentials for a web identity: the JWT in AWS_WEB_IDENTITY_TOKEN_FILE
// exchanged for a role's temporary credentials with STS
// AssumeRoleWithWebIdentity (an unsigned Query API call). This is how EKS
// IAM Roles for Service Accounts (IRSA) and other OIDC federations hand a
// pod its role: the webhook sets AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE
// and keeps the token file fresh. The token is a secret: it never appears in
// a log line or an error message.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "common/aws_credentials.h"
#include "common/http.h"
#include "common/status.h"

namespace sg {

struct WebIdentitySettings {
  std::string role_arn;
  std::string token_file;
  std::string session_name;
  std::string endpoint;  // "https://sts.us-east-1.amazonaws.com", no trailing slash
};

// The settings from the environment: AWS_WEB_IDENTITY_TOKEN_FILE and
// AWS_ROLE_ARN (both, or an error naming the missing one), AWS_ROLE_SESSION_NAME
// (else "spotguard-<unix seconds>"), the endpoint from AWS_ENDPOINT_URL_STS or
// AWS_ENDPOINT_URL, else the regional one of AWS_REGION or AWS_DEFAULT_REGION,
// else the global https://sts.amazonaws.com. Nothing when neither of the two
// variables is set.
std::optional<StatusOr<WebIdentitySettings>> WebIdentityFromEnv(
    const std::map<std::string, std::string>& env, int64_t unix_seconds);

// The form-encoded body of the call.
std::string AssumeRoleWithWebIdentityBody(const WebIdentitySettings& settings,
                                          const std::string& token);

// The credentials in an answer; an STS error (InvalidIdentityToken,
// AccessDenied, ExpiredTokenException) as a Status that names the code and the
// role, never the token.
StatusOr<TimedCredentials> ParseAssumeRoleWithWebIdentityAnswer(long http_status,
                                                                const std::string& body,
                                                                const std::string& role_arn);

// Reads the token file and makes the call.
StatusOr<TimedCredentials> FetchWebIdentityCredentials(const WebIdentitySettings& settings,
                                                       HttpTransport& transport);

}  // namespace sg
