// EC2's spot price of an instance type in an Availability Zone, from the
// EC2 query API (version 2016-11-15): DescribeSpotPriceHistory, a POST of a
// form-encoded body to https://ec2.<region>.amazonaws.com/ (or a custom
// endpoint), signed with SigV4 for service "ec2", retried as retry.h says.
// Errors (<Response><Errors><Error><Code>) become Status values whose
// reason() is the service's code ("UnauthorizedOperation", ...).
//
// This file builds the request and reads the answer (pure functions);
// signing, sending, retrying and clock-skew correction are the
// SignedCallExecutor's (aws_call.h), as for the Auto Scaling client.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/aws_call.h"
#include "common/aws_credentials.h"
#include "common/clock.h"
#include "common/http.h"
#include "common/retry.h"
#include "common/status.h"

namespace sg {

inline constexpr std::string_view kEc2ApiVersion = "2016-11-15";
// The spot prices of Linux instances, as the service names the product.
inline constexpr std::string_view kLinuxProduct = "Linux/UNIX";

// Where EC2 calls go: `configured` (non-empty), then AWS_ENDPOINT_URL_EC2,
// then AWS_ENDPOINT_URL, then https://ec2.<region>.amazonaws.com
// (".amazonaws.com.cn" for the cn- regions).
std::string ResolveEc2Endpoint(const std::optional<std::string>& configured,
                               const std::string& region,
                               const std::map<std::string, std::string>& env);

struct SpotPriceClientOptions {
  std::string region = "us-east-1";
  std::string endpoint;  // empty: the AWS endpoint of `region`
  RetryPolicy retry;
  std::chrono::milliseconds timeout{20'000};  // per attempt
};

// One entry of the spot price history.
struct SpotPrice {
  std::string instance_type, availability_zone, product_description;
  double usd_per_hour = 0;
  std::string timestamp;  // when the price took effect, as the service wrote it (UTC)
};

// The parameters of DescribeSpotPriceHistory for the price of `instance_type`
// in `zone` at `at`: InstanceType.1, ProductDescription.1 (Linux/UNIX),
// AvailabilityZone, and StartTime = EndTime = `at`, for which the service
// answers with the price in effect then.
QueryParameters SpotPriceQuery(const std::string& instance_type, const std::string& zone,
                               Clock::WallTime at);

// Reads a DescribeSpotPriceHistoryResponse (spotPriceHistorySet/item with
// instanceType, productDescription, spotPrice, timestamp, availabilityZone).
StatusOr<std::vector<SpotPrice>> ParseSpotPriceHistoryXml(const std::string& body);

// Parses an EC2 <Response><Errors><Error> document (Code, Message; RequestID
// beside Errors); nullopt when `body` is not one.
std::optional<AwsErrorInfo> ParseEc2ErrorXml(std::string_view body);
// What an attempt's result means for retrying (RequestLimitExceeded and
// 5xx are retried, RequestExpired corrects the clock).
Outcome ClassifyEc2Response(const StatusOr<HttpResponse>& response);
// The Status of a failed EC2 call: reason() is the service's code.
Status Ec2ErrorStatus(std::string_view action, const AwsErrorInfo& error);

class SpotPriceClient {
 public:
  SpotPriceClient(HttpTransport& transport, CredentialsProvider& credentials, Clock& clock,
                  SpotPriceClientOptions options, UniformRandom random = DefaultRandom());

  // The spot price of Linux `instance_type` in `zone` now: the newest entry
  // the service answers with for that type and zone. NotFound (reason
  // "NoSpotPrice") when it answers with none (a type not sold as spot there).
  StatusOr<SpotPrice> CurrentSpotPrice(const std::string& instance_type, const std::string& zone);

  const std::string& endpoint() const { return endpoint_; }

 private:
  const SpotPriceClientOptions options_;
  const std::string endpoint_;
  Clock& clock_;
  SignedCallExecutor executor_;
};

}  // namespace sg
