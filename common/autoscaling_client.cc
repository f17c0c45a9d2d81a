#include "common/autoscaling_client.h"

#include <pugixml.hpp>

#include "common/sigv4.h"
#include "common/strings.h"

namespace sg {
namespace {

AutoScalingErrorInfo AutoScalingErrorOf(const HttpResponse& resp) {
  static const std::map<long, std::string> kStatusCodes = {
      {400, "BadRequest"}, {403, "AccessDenied"},    {404, "NotFound"},
      {429, "Throttling"}, {500, "InternalFailure"}, {503, "ServiceUnavailable"},
  };
  AutoScalingErrorInfo e = ParseAutoScalingErrorXml(resp.body).value_or(AutoScalingErrorInfo{});
  CompleteErrorInfo(e, resp, kStatusCodes, "x-amzn-requestid");
  return e;
}

std::string XmlChildText(const pugi::xml_node& node, const char* name) {
  return node.child(name).text().as_string();
}

}  // namespace

std::string ResolveAutoScalingEndpoint(const std::optional<std::string>& configured,
                                       const std::string& region,
                                       const std::map<std::string, std::string>& env) {
  return ResolveServiceEndpoint(configured, {"AWS_ENDPOINT_URL_AUTOSCALING", "AWS_ENDPOINT_URL"},
                                AwsDefaultEndpoint("autoscaling", region), env);
}

std::string BuildAutoScalingBody(std::string_view action, const QueryParameters& parameters) {
  return BuildQueryBody(action, kAutoScalingApiVersion, parameters);
}

std::optional<AutoScalingErrorInfo> ParseAutoScalingErrorXml(const std::string& body) {
  AutoScalingErrorInfo e;
  std::optional<AwsErrorInfo> parsed = ParseAwsErrorXml(body, "ErrorResponse", &e.type);
  if (!parsed) return std::nullopt;
  static_cast<AwsErrorInfo&>(e) = std::move(*parsed);
  return e;
}

Outcome ClassifyAutoScalingResponse(const StatusOr<HttpResponse>& response) {
  // A pending update to the same group (ResourceContention, a 500) or a
  // scaling activity in progress: the service asks to try again later.
  static const ErrorOutcomes kOutcomes = {
      .clock_skew = {"RequestExpired"},
      .throttled = {"Throttling", "ThrottlingException", "RequestLimitExceeded"},
      .server_error = {"ResourceContention", "ScalingActivityInProgress", "InternalFailure",
                       "ServiceUnavailable"},
      .server_failed = [](long status) { return status >= 500; }};
  return ClassifyAwsAnswer(response, AutoScalingErrorOf, kOutcomes);
}

Status AutoScalingErrorStatus(std::string_view action, const AutoScalingErrorInfo& e) {
  static const ErrorCodeGroups kCodes = {
      {StatusCode::kInvalidArgument,
       {"ValidationError", "InvalidAction", "MissingParameter", "InvalidParameterValue"}},
      // A pending update to the same group, a scaling activity in progress.
      {StatusCode::kUnavailable, {"ResourceContention", "ScalingActivityInProgress"}},
  };
  StatusCode code = AwsErrorCode(e, kCodes);
  // The service reports a missing group or lifecycle action as a
  // ValidationError; callers want to tell "not there" from "malformed".
  const std::string lower = ToLower(e.message);
  if (e.code == "ValidationError" &&
      (lower.find("not found") != std::string::npos ||
       lower.find("no active lifecycle action") != std::string::npos)) {
    code = StatusCode::kNotFound;
  }
  return AwsErrorStatus(code, "Auto Scaling " + std::string(action), e);
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
    i.instance_id = XmlChildText(m, "InstanceId");
    i.group_name = XmlChildText(m, "AutoScalingGroupName");
    i.lifecycle_state = XmlChildText(m, "LifecycleState");
    i.health_status = XmlChildText(m, "HealthStatus");
    i.availability_zone = XmlChildText(m, "AvailabilityZone");
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
    : options_(std::move(options)),
      endpoint_(ResolveAutoScalingEndpoint(
          options_.endpoint.empty() ? std::nullopt : std::optional(options_.endpoint),
          options_.region, {})),
      executor_(transport, credentials, clock,
                {"autoscaling", options_.region, "Auto Scaling", options_.retry},
                std::move(random)) {}

StatusOr<HttpResponse> AutoScalingClient::Execute(std::string_view action,
                                                  const QueryParameters& parameters) {
  SG_ASSIGN_OR_RETURN(SignedRequest request, PostTo(endpoint_, "Auto Scaling"));
  request.headers = {{"content-type", "application/x-www-form-urlencoded; charset=utf-8"}};
  request.body = BuildAutoScalingBody(action, parameters);
  request.timeout = options_.timeout;
  request.what = "Auto Scaling " + std::string(action);
  AnswerRules rules;
  rules.classify = ClassifyAutoScalingResponse;
  rules.error = [action](const HttpResponse& resp) {
    return AutoScalingErrorStatus(action, AutoScalingErrorOf(resp));
  };
  return executor_.Execute(std::move(request), rules);
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
