#include "common/autoscaling_client.h"

#include <ctime>
#include <pugixml.hpp>

#include "common/crypto.h"
#include "common/log.h"
#include "common/sigv4.h"
#include "common/strings.h"

namespace sg {
namespace {

std::string EnvOr(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

std::string CodeForStatus(long status) {
  switch (status) {
    case 400:
      return "BadRequest";
    case 403:
      return "AccessDenied";
    case 404:
      return "NotFound";
    case 429:
      return "Throttling";
    case 500:
      return "InternalFailure";
    case 503:
      return "ServiceUnavailable";
    default:
      return "HTTP" + std::to_string(status);
  }
}

AutoScalingErrorInfo ErrorOf(const HttpResponse& resp) {
  AutoScalingErrorInfo e = ParseAutoScalingErrorXml(resp.body).value_or(AutoScalingErrorInfo{});
  e.http_status = resp.status;
  if (e.code.empty()) e.code = CodeForStatus(resp.status);
  if (e.request_id.empty()) e.request_id = resp.Header("x-amzn-requestid");
  return e;
}

// The HTTP Date header ("Sun, 22 Nov 2026 08:00:00 GMT").
std::optional<Clock::WallTime> ParseHttpDate(const std::string& text) {
  std::tm tm{};
  if (text.empty() || strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S", &tm) == nullptr) {
    return std::nullopt;
  }
  return WallTimeFromUtc(tm);
}

// "https://host:port/base" -> scheme "https://", authority "host:port", path "/base".
struct EndpointParts {
  std::string scheme, authority, path;
};
std::optional<EndpointParts> SplitEndpoint(const std::string& endpoint) {
  const size_t sep = endpoint.find("://");
  if (sep == std::string::npos) return std::nullopt;
  EndpointParts p;
  p.scheme = endpoint.substr(0, sep + 3);
  if (p.scheme != "http://" && p.scheme != "https://") return std::nullopt;
  const std::string rest = endpoint.substr(sep + 3);
  const size_t slash = rest.find('/');
  p.authority = rest.substr(0, slash);
  p.path = slash == std::string::npos ? "/" : rest.substr(slash);
  if (p.authority.empty()) return std::nullopt;
  return p;
}

std::string DefaultEndpoint(const std::string& region) {
  const std::string suffix = region.starts_with("cn-") ? ".amazonaws.com.cn" : ".amazonaws.com";
  return "https://autoscaling." + region + suffix;
}

std::string ChildText(const pugi::xml_node& node, const char* name) {
  return node.child(name).text().as_string();
}

}  // namespace

std::string ResolveAutoScalingEndpoint(const std::optional<std::string>& configured,
                                       const std::string& region,
                                       const std::map<std::string, std::string>& env) {
  std::string endpoint = configured.value_or("");
  for (const char* name : {"AWS_ENDPOINT_URL_AUTOSCALING", "AWS_ENDPOINT_URL"}) {
    if (endpoint.empty()) endpoint = EnvOr(env, name);
  }
  if (endpoint.empty()) endpoint = DefaultEndpoint(region);
  while (endpoint.size() > 1 && endpoint.back() == '/') endpoint.pop_back();
  return endpoint;
}

std::string BuildAutoScalingBody(std::string_view action, const QueryParameters& parameters) {
  std::string body = "Action=" + UriEncode(action, /*keep_slash=*/false) +
                     "&Version=" + std::string(kAutoScalingApiVersion);
  for (const auto& [name, value] : parameters) {
    body += "&" + UriEncode(name, false) + "=" + UriEncode(value, false);
  }
  return body;
}

std::optional<AutoScalingErrorInfo> ParseAutoScalingErrorXml(const std::string& body) {
  if (body.find("<ErrorResponse") == std::string::npos) return std::nullopt;
  pugi::xml_document doc;
  if (!doc.load_buffer(body.data(), body.size())) return std::nullopt;
  pugi::xml_node root = doc.child("ErrorResponse");
  pugi::xml_node err = root.child("Error");
  if (!err) return std::nullopt;
  AutoScalingErrorInfo e;
  e.type = ChildText(err, "Type");
  e.code = ChildText(err, "Code");
  e.message = ChildText(err, "Message");
  e.request_id = ChildText(root, "RequestId");
  return e;
}

Outcome ClassifyAutoScalingResponse(const StatusOr<HttpResponse>& response) {
  // A transport failure is transient unless retrying cannot help (TLS verification).
  if (!response.ok()) {
    return response.status().Is(StatusCode::kUnavailable) ? Outcome::kTransient : Outcome::kFatal;
  }
  const long status = response->status;
  if (status >= 200 && status < 300) return Outcome::kSuccess;
  const AutoScalingErrorInfo e = ErrorOf(*response);
  if (e.code == "RequestExpired") return Outcome::kClockSkew;
  if (status == 429 || e.code == "Throttling" || e.code == "ThrottlingException" ||
      e.code == "RequestLimitExceeded") {
    return Outcome::kThrottled;
  }
  // A pending update to the same group (500) or a scaling activity in
  // progress: the service asks to try again later.
  if (e.code == "ResourceContention" || e.code == "ScalingActivityInProgress" ||
      e.code == "InternalFailure" || e.code == "ServiceUnavailable" || status >= 500) {
    return Outcome::kServerError;
  }
  return Outcome::kFatal;
}

Status AutoScalingErrorStatus(std::string_view action, const AutoScalingErrorInfo& e) {
  static const std::map<std::string, StatusCode> kCodes = {
      {"ValidationError", StatusCode::kInvalidArgument},
      {"InvalidAction", StatusCode::kInvalidArgument},
      {"MissingParameter", StatusCode::kInvalidArgument},
      {"InvalidParameterValue", StatusCode::kInvalidArgument},
      {"AccessDenied", StatusCode::kPermissionDenied},
      {"AccessDeniedException", StatusCode::kPermissionDenied},
      {"NotAuthorized", StatusCode::kPermissionDenied},
      {"UnauthorizedOperation", StatusCode::kPermissionDenied},
      {"InvalidClientTokenId", StatusCode::kPermissionDenied},
      {"SignatureDoesNotMatch", StatusCode::kPermissionDenied},
      {"IncompleteSignature", StatusCode::kPermissionDenied},
      {"MissingAuthenticationToken", StatusCode::kPermissionDenied},
      {"ExpiredToken", StatusCode::kPermissionDenied},
      {"OptInRequired", StatusCode::kPermissionDenied},
      {"Throttling", StatusCode::kUnavailable},
      {"ThrottlingException", StatusCode::kUnavailable},
      {"ResourceContention", StatusCode::kUnavailable},
      {"ScalingActivityInProgress", StatusCode::kUnavailable},
      {"ServiceUnavailable", StatusCode::kUnavailable},
      {"InternalFailure", StatusCode::kUnavailable},
      {"RequestExpired", StatusCode::kUnavailable},
  };
  StatusCode code = StatusCode::kIOError;
  if (auto it = kCodes.find(e.code); it != kCodes.end()) {
    code = it->second;
  } else if (e.http_status >= 500) {
    code = StatusCode::kUnavailable;
  }
  // The service reports a missing group or lifecycle action as a
  // ValidationError; callers want to tell "not there" from "malformed".
  const std::string lower = ToLower(e.message);
  if (e.code == "ValidationError" &&
      (lower.find("not found") != std::string::npos ||
       lower.find("no active lifecycle action") != std::string::npos)) {
    code = StatusCode::kNotFound;
  }
  std::string msg = "Auto Scaling " + std::string(action) + ": " + e.code;
  if (!e.message.empty()) msg += ": " + e.message;
  msg += " (HTTP " + std::to_string(e.http_status);
  if (!e.request_id.empty()) msg += ", request id " + e.request_id;
  msg += ")";
  return Status(code, std::move(msg)).WithReason(e.code);
}

StatusOr<std::vector<AutoScalingInstance>> ParseDescribeAutoScalingInstancesXml(
    const std::string& body) {
  pugi::xml_document doc;
  if (auto r = doc.load_buffer(body.data(), body.size()); !r) {
    return Status::Corruption("DescribeAutoScalingInstances: the answer is not XML (" +
                              std::string(r.description()) + ")");
  }
  pugi::xml_node result =
      doc.child("DescribeAutoScalingInstancesResponse").child("DescribeAutoScalingInstancesResult");
  if (!result) {
    return Status::Corruption(
        "DescribeAutoScalingInstances: no DescribeAutoScalingInstancesResult in the answer");
  }
  std::vector<AutoScalingInstance> out;
  for (pugi::xml_node m : result.child("AutoScalingInstances").children("member")) {
    AutoScalingInstance i;
    i.instance_id = ChildText(m, "InstanceId");
    i.group_name = ChildText(m, "AutoScalingGroupName");
    i.lifecycle_state = ChildText(m, "LifecycleState");
    i.health_status = ChildText(m, "HealthStatus");
    i.availability_zone = ChildText(m, "AvailabilityZone");
    if (i.instance_id.empty() || i.group_name.empty()) {
      return Status::Corruption(
          "DescribeAutoScalingInstances: a member without InstanceId or AutoScalingGroupName");
    }
    out.push_back(std::move(i));
  }
  return out;
}

AutoScalingClient::AutoScalingClient(HttpTransport& transport, CredentialsProvider& credentials,
                                     Clock& clock, AutoScalingClientOptions options,
                                     UniformRandom random)
    : transport_(transport),
      credentials_(credentials),
      clock_(clock),
      options_(std::move(options)),
      endpoint_(ResolveAutoScalingEndpoint(
          options_.endpoint.empty() ? std::nullopt : std::optional(options_.endpoint),
          options_.region, {})),
      random_(std::move(random)),
      budget_(options_.retry.budget_capacity) {}

StatusOr<HttpResponse> AutoScalingClient::Execute(std::string_view action,
                                                  const QueryParameters& parameters) {
  const std::optional<EndpointParts> parts = SplitEndpoint(endpoint_);
  if (!parts) {
    return Status::InvalidArgument("Auto Scaling endpoint \"" + endpoint_ +
                                   "\" must be an http(s):// URL");
  }
  const std::string body = BuildAutoScalingBody(action, parameters);
  const std::string payload_hash = Sha256Hex(body);
  const std::string url = parts->scheme + parts->authority + parts->path;
  for (int attempt = 1;; ++attempt) {
    SG_ASSIGN_OR_RETURN(AwsCredentials creds, credentials_.Get());
    SigningRequest signing;
    signing.method = "POST";
    signing.path = parts->path;
    signing.headers = {{"content-type", "application/x-www-form-urlencoded; charset=utf-8"},
                       {"host", parts->authority}};
    signing.payload_sha256_hex = payload_hash;
    const auto now = clock_.Now() + std::chrono::seconds(clock_offset_s_.load());
    SignRequest(signing, creds, options_.region, "autoscaling", now);

    HttpRequest request;
    request.method = "POST";
    request.url = url;
    request.headers = std::move(signing.headers);
    request.body = body;
    request.timeout = options_.timeout;
    StatusOr<HttpResponse> response = transport_.Send(request);

    const Outcome outcome = ClassifyAutoScalingResponse(response);
    if (outcome == Outcome::kSuccess) {
      if (attempt == 1) budget_.OnSuccess();
      return response;
    }
    Status failure = response.ok()
                         ? AutoScalingErrorStatus(action, ErrorOf(*response))
                         : response.status().WithContext("Auto Scaling " + std::string(action));
    if (outcome == Outcome::kClockSkew) {
      // Sign with the service's time from now on, and resend at once.
      const std::optional<Clock::WallTime> server_time = ParseHttpDate(response->Header("date"));
      if (!server_time || attempt >= options_.retry.max_attempts) return failure;
      const auto offset =
          std::chrono::duration_cast<std::chrono::seconds>(*server_time - clock_.Now());
      clock_offset_s_.store(offset.count());
      LogWarn("Auto Scaling says our clock is off; signing with an offset of {}s from now on",
              offset.count());
      continue;
    }
    if (!IsRetryable(outcome) || attempt >= options_.retry.max_attempts ||
        !budget_.TryAcquire(outcome)) {
      return failure;
    }
    const Duration wait = BackoffDelay(options_.retry, attempt, random_);
    LogDebug("Auto Scaling {}: {} on attempt {}, retrying in {}ms", action, OutcomeName(outcome),
             attempt, wait.count());
    clock_.SleepFor(wait);
  }
}

StatusOr<AutoScalingInstance> AutoScalingClient::DescribeAutoScalingInstance(
    const std::string& instance_id) {
  SG_ASSIGN_OR_RETURN(HttpResponse resp, Execute("DescribeAutoScalingInstances",
                                                 {{"InstanceIds.member.1", instance_id}}));
  SG_ASSIGN_OR_RETURN(std::vector<AutoScalingInstance> instances,
                      ParseDescribeAutoScalingInstancesXml(resp.body));
  for (AutoScalingInstance& i : instances) {
    if (i.instance_id == instance_id) return std::move(i);
  }
  return Status::NotFound("instance " + instance_id + " is not in an Auto Scaling group")
      .WithReason("NotInAutoScalingGroup");
}

Status AutoScalingClient::UpdateAutoScalingGroup(const std::string& group_name,
                                                 const GroupCapacity& capacity) {
  QueryParameters params = {{"AutoScalingGroupName", group_name}};
  if (capacity.min_size) params.emplace_back("MinSize", std::to_string(*capacity.min_size));
  if (capacity.max_size) params.emplace_back("MaxSize", std::to_string(*capacity.max_size));
  if (capacity.desired_capacity) {
    params.emplace_back("DesiredCapacity", std::to_string(*capacity.desired_capacity));
  }
  return Execute("UpdateAutoScalingGroup", params).status();
}

Status AutoScalingClient::CompleteLifecycleAction(const std::string& group_name,
                                                  const std::string& hook_name,
                                                  const std::string& instance_id,
                                                  LifecycleActionResult result) {
  return Execute("CompleteLifecycleAction",
                 {{"AutoScalingGroupName", group_name},
                  {"LifecycleHookName", hook_name},
                  {"LifecycleActionResult",
                   result == LifecycleActionResult::kContinue ? "CONTINUE" : "ABANDON"},
                  {"InstanceId", instance_id}})
      .status();
}

}  // namespace sg
