#include "common/sts_web_identity.h"

#include <pugixml.hpp>

#include "common/aws_call.h"
#include "common/files.h"
#include "common/sigv4.h"
#include "common/strings.h"

namespace sg {
namespace {

constexpr const char* kStsApiVersion = "2011-06-15";

std::string StsEndpoint(const std::map<std::string, std::string>& env) {
  std::string endpoint = EnvOr(env, "AWS_ENDPOINT_URL_STS", EnvOr(env, "AWS_ENDPOINT_URL"));
  if (endpoint.empty()) {
    const std::string region = EnvOr(env, "AWS_REGION", EnvOr(env, "AWS_DEFAULT_REGION"));
    if (region.empty()) {
      endpoint = "https://sts.amazonaws.com";
    } else {
      const std::string suffix = region.starts_with("cn-") ? ".amazonaws.com.cn" : ".amazonaws.com";
      endpoint = "https://sts." + region + suffix;
    }
  }
  while (endpoint.size() > 1 && endpoint.back() == '/') endpoint.pop_back();
  return endpoint;
}

}  // namespace

std::optional<StatusOr<WebIdentitySettings>> WebIdentityFromEnv(
    const std::map<std::string, std::string>& env, int64_t unix_seconds) {
  WebIdentitySettings s;
  s.token_file = EnvOr(env, "AWS_WEB_IDENTITY_TOKEN_FILE");
  s.role_arn = EnvOr(env, "AWS_ROLE_ARN");
  if (s.token_file.empty() && s.role_arn.empty()) return std::nullopt;
  if (s.token_file.empty()) {
    return StatusOr<WebIdentitySettings>(Status::InvalidArgument(
        "AWS_ROLE_ARN is set but AWS_WEB_IDENTITY_TOKEN_FILE is not: both are needed for "
        "web identity credentials"));
  }
  if (s.role_arn.empty()) {
    return StatusOr<WebIdentitySettings>(Status::InvalidArgument(
        "AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not: both are needed for "
        "web identity credentials"));
  }
  s.session_name = EnvOr(env, "AWS_ROLE_SESSION_NAME", "spotguard-" + std::to_string(unix_seconds));
  s.endpoint = StsEndpoint(env);
  return StatusOr<WebIdentitySettings>(std::move(s));
}

std::string AssumeRoleWithWebIdentityBody(const WebIdentitySettings& settings,
                                          const std::string& token) {
  return "Action=AssumeRoleWithWebIdentity&Version=" + std::string(kStsApiVersion) +
         "&RoleArn=" + UriEncode(settings.role_arn, false) +
         "&RoleSessionName=" + UriEncode(settings.session_name, false) +
         "&WebIdentityToken=" + UriEncode(token, false);
}

StatusOr<TimedCredentials> ParseAssumeRoleWithWebIdentityAnswer(long http_status,
                                                                const std::string& body,
                                                                const std::string& role_arn) {
  if (http_status != 200) {
    std::optional<AwsErrorInfo> error = ParseAwsErrorXml(body, "ErrorResponse");
    const std::string code =
        error && !error->code.empty() ? error->code : "HTTP " + std::to_string(http_status);
    const std::string message = error ? error->message : "";
    const StatusCode status_code = http_status >= 500   ? StatusCode::kUnavailable
                                   : http_status == 403 ? StatusCode::kPermissionDenied
                                                        : StatusCode::kInvalidArgument;
    return Status(status_code, "STS AssumeRoleWithWebIdentity for " + role_arn + " failed: " +
                                   code + (message.empty() ? "" : " (" + message + ")"))
        .WithReason(code);
  }
  pugi::xml_document doc;
  if (!doc.load_buffer(body.data(), body.size())) {
    return Status::Corruption("STS AssumeRoleWithWebIdentity: the answer is not XML");
  }
  const pugi::xml_node creds = doc.child("AssumeRoleWithWebIdentityResponse")
                                   .child("AssumeRoleWithWebIdentityResult")
                                   .child("Credentials");
  TimedCredentials out;
  out.credentials.access_key_id = creds.child("AccessKeyId").text().as_string();
  out.credentials.secret_access_key = creds.child("SecretAccessKey").text().as_string();
  out.credentials.session_token = creds.child("SessionToken").text().as_string();
  if (out.credentials.access_key_id.empty() || out.credentials.secret_access_key.empty() ||
      out.credentials.session_token.empty()) {
    return Status::Corruption(
        "STS AssumeRoleWithWebIdentity: the answer has no complete Credentials");
  }
  const std::string expiration = creds.child("Expiration").text().as_string();
  SG_ASSIGN_OR_RETURN(Clock::WallTime expires, ParseIso8601(expiration));
  out.expiration = expires;
  out.source = "web identity " + role_arn;
  return out;
}

StatusOr<TimedCredentials> FetchWebIdentityCredentials(const WebIdentitySettings& settings,
                                                       HttpTransport& transport) {
  auto token = ReadFileToString(settings.token_file);
  if (!token.ok()) {
    return Status(token.status().code(), "the web identity token file " + settings.token_file +
                                             " cannot be read: " + token.status().message());
  }
  HttpRequest req;
  req.method = "POST";
  req.url = settings.endpoint + "/";
  req.headers.emplace_back("Content-Type", "application/x-www-form-urlencoded; charset=utf-8");
  req.body = AssumeRoleWithWebIdentityBody(settings, std::string(Trim(*token)));
  req.timeout = std::chrono::seconds(10);
  SG_ASSIGN_OR_RETURN(HttpResponse resp, transport.Send(req));
  return ParseAssumeRoleWithWebIdentityAnswer(resp.status, resp.body, settings.role_arn);
}

}  // namespace sg
