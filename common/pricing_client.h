// The on-demand price of an EC2 instance type, from the AWS Price List
// query API (service "pricing", version 2017-10-15): GetProducts, a JSON 1.1
// call (POST / with X-Amz-Target: AWSPriceListService.GetProducts and
// Content-Type application/x-amz-json-1.1) signed with SigV4 for service
// "pricing". The API is served in a few regions only (us-east-1,
// eu-central-1, ap-south-1; cn-northwest-1 for the China regions), whatever
// the region priced. Errors ({"__type", "message"}) become Status values
// whose reason() is the service's code ("AccessDeniedException", ...).
//
// Request builder and answer reader are pure; signing, sending and retrying
// are the SignedCallExecutor's (aws_call.h).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "common/aws_call.h"
#include "common/aws_credentials.h"
#include "common/clock.h"
#include "common/http.h"
#include "common/retry.h"
#include "common/status.h"

namespace sg {

inline constexpr std::string_view kPricingTarget = "AWSPriceListService.GetProducts";

// The region whose Price List endpoint serves a job in `region`: the
// region itself where the API is served, cn-northwest-1 for the China
// regions, else us-east-1.
std::string PricingApiRegion(const std::string& region);

// Where Price List calls go: `configured` (non-empty), then
// AWS_ENDPOINT_URL_PRICING, then AWS_ENDPOINT_URL, then
// https://api.pricing.<api_region>.amazonaws.com (".com.cn" in China).
std::string ResolvePricingEndpoint(const std::optional<std::string>& configured,
                                   const std::string& api_region,
                                   const std::map<std::string, std::string>& env);

struct PricingClientOptions {
  std::string api_region = "us-east-1";  // the API's region (PricingApiRegion), for SigV4
  std::string endpoint;                  // empty: the AWS endpoint of `api_region`
  RetryPolicy retry;
  std::chrono::milliseconds timeout{20'000};  // per attempt
};

struct OnDemandPrice {
  std::string instance_type, region;
  double usd_per_hour = 0;
  std::string sku;
  int products = 0;  // how many products matched (the lowest price is taken)
};

// The GetProducts body for Linux `instance_type` in `region`: service code
// AmazonEC2 and TERM_MATCH filters on instanceType, regionCode,
// operatingSystem=Linux, tenancy=Shared, preInstalledSw=NA,
// capacitystatus=Used (the plain on-demand instance, no reservation).
std::string OnDemandPriceQuery(const std::string& instance_type, const std::string& region);

// Reads a GetProducts answer: PriceList holds each product as a JSON string
// whose terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD is the hourly
// price. The lowest non-zero price among the products (a capacity
// reservation's zero-priced entries are no instance's price). NotFound
// (reason "NoOnDemandPrice") when no product has one.
StatusOr<OnDemandPrice> ParseOnDemandPrice(const std::string& body,
                                           const std::string& instance_type,
                                           const std::string& region);

// A JSON 1.1 error: "__type" (its part after '#') or the x-amzn-ErrorType
// header, and "message" or "Message".
AwsErrorInfo PricingErrorOf(const HttpResponse& response);
Outcome ClassifyPricingResponse(const StatusOr<HttpResponse>& response);
Status PricingErrorStatus(const AwsErrorInfo& error);

class PricingClient {
 public:
  PricingClient(HttpTransport& transport, CredentialsProvider& credentials, Clock& clock,
                PricingClientOptions options, UniformRandom random = DefaultRandom());

  // The on-demand price of Linux `instance_type` in `region` (a region code:
  // "us-east-1"), in USD per hour.
  StatusOr<OnDemandPrice> OnDemandPriceOf(const std::string& instance_type,
                                          const std::string& region);

  const std::string& endpoint() const { return endpoint_; }

 private:
  const PricingClientOptions options_;
  const std::string endpoint_;
  SignedCallExecutor executor_;
};

}  // namespace sg
