// The EC2 Auto Scaling query API (version 2011-01-01): the three calls a
// spot job needs at its end of life, with no policy about when to make them.
// A call is a POST of a form-encoded body ("Action=...&Version=2011-01-01&...")
// to https://autoscaling.<region>.amazonaws.com/ (or a custom endpoint),
// signed with SigV4 for service "autoscaling", retried as retry.h says.
// Errors (<ErrorResponse><Error><Code>) become Status values whose reason()
// is the service's error code ("ValidationError", "Throttling", ...).
//
// This file only builds requests and reads answers (pure functions); signing,
// sending, retrying and clock-skew correction are the SignedCallExecutor's
// (aws_call.h), the same executor the S3 client uses.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/aws_call.h"
#include "common/aws_credentials.h"
#include "common/clock.h"
#include "common/http.h"
#include "common/retry.h"
#include "common/status.h"

namespace sg {

inline constexpr std::string_view kAutoScalingApiVersion = "2011-01-01";

// Where Auto Scaling calls go, as the AWS tools resolve it: `configured`
// (non-empty), then AWS_ENDPOINT_URL_AUTOSCALING, then AWS_ENDPOINT_URL, then
// https://autoscaling.<region>.amazonaws.com (".amazonaws.com.cn" for the
// cn- regions). A trailing '/' is dropped.
std::string ResolveAutoScalingEndpoint(const std::optional<std::string>& configured,
                                       const std::string& region,
                                       const std::map<std::string, std::string>& env);

struct AutoScalingClientOptions {
  std::string region = "us-east-1";
  // "https://autoscaling.us-east-1.amazonaws.com" or a custom URL; empty: the
  // AWS endpoint of `region`.
  std::string endpoint;
  RetryPolicy retry;
  std::chrono::milliseconds timeout{20'000};  // per attempt
};

// "Action=<action>&Version=2011-01-01&<name>=<value>..." with names and
// values percent-encoded (RFC 3986: all but A-Za-z0-9-._~).
std::string BuildAutoScalingBody(std::string_view action, const QueryParameters& parameters);

// code: "ValidationError"; derived from the status when there is no body.
struct AutoScalingErrorInfo : AwsErrorInfo {
  std::string type;  // "Sender" or "Receiver"
};

// Parses an <ErrorResponse> document; nullopt when `body` is not one.
std::optional<AutoScalingErrorInfo> ParseAutoScalingErrorXml(const std::string& body);
// What an attempt's result means for retrying.
Outcome ClassifyAutoScalingResponse(const StatusOr<HttpResponse>& response);
// The Status for a failed call: the message names the action and carries the
// service's code and message; reason() is the code.
Status AutoScalingErrorStatus(std::string_view action, const AutoScalingErrorInfo& error);

struct AutoScalingInstance {
  std::string instance_id;
  std::string group_name;
  std::string lifecycle_state;  // "InService", "Terminating:Wait", ...
  std::string health_status;
  std::string availability_zone;
};

// Reads a DescribeAutoScalingInstancesResponse.
StatusOr<std::vector<AutoScalingInstance>> ParseDescribeAutoScalingInstancesXml(
    const std::string& body);

// New sizes for UpdateAutoScalingGroup; unset fields are not sent (left as they are).
struct GroupCapacity {
  std::optional<int> min_size = std::nullopt;
  std::optional<int> max_size = std::nullopt;
  std::optional<int> desired_capacity = std::nullopt;
};

enum class LifecycleActionResult { kContinue, kAbandon };

// The calls the agent makes at a job's end, as an interface: the agent's
// loop is tested with a fake, the product uses AutoScalingClient.
class AutoScalingApi {
 public:
  virtual ~AutoScalingApi() = default;
  // DescribeAutoScalingInstances for one instance. NotFound (reason
  // "NotInAutoScalingGroup") when the instance is in no group: the service
  // then answers with an empty list.
  virtual StatusOr<AutoScalingInstance> DescribeAutoScalingInstance(
      const std::string& instance_id) = 0;
  // UpdateAutoScalingGroup with the fields of `capacity` that are set.
  virtual Status UpdateAutoScalingGroup(const std::string& group_name,
                                        const GroupCapacity& capacity) = 0;
  // CompleteLifecycleAction for the instance's pending action of `hook_name`.
  virtual Status CompleteLifecycleAction(
      const std::string& group_name, const std::string& hook_name, const std::string& instance_id,
      LifecycleActionResult result = LifecycleActionResult::kContinue) = 0;
};

class AutoScalingClient final : public AutoScalingApi {
 public:
  AutoScalingClient(HttpTransport& transport, CredentialsProvider& credentials, Clock& clock,
                    AutoScalingClientOptions options, UniformRandom random = DefaultRandom());

  StatusOr<AutoScalingInstance> DescribeAutoScalingInstance(
      const std::string& instance_id) override;
  Status UpdateAutoScalingGroup(const std::string& group_name,
                                const GroupCapacity& capacity) override;
  Status CompleteLifecycleAction(
      const std::string& group_name, const std::string& hook_name, const std::string& instance_id,
      LifecycleActionResult result = LifecycleActionResult::kContinue) override;

  // The endpoint calls go to, after defaulting.
  const std::string& endpoint() const { return endpoint_; }

 private:
  // Builds the signed request for one action and hands it to the executor;
  // returns the 2xx answer.
  StatusOr<HttpResponse> Execute(std::string_view action, const QueryParameters& parameters);

  const AutoScalingClientOptions options_;
  const std::string endpoint_;
  SignedCallExecutor executor_;
};

}  // namespace sg
