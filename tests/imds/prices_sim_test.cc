// SpotPriceClient and PricingClient over real HTTP against
// tests/tools/prices_sim.py, which recomputes every SigV4 signature, checks
// the scope (service ec2 in the region; service pricing in the Price List's
// region) and each call's parameters, answers in the documented shapes (EC2
// XML; JSON 1.1 with each product a JSON string) and keeps a log of the calls.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/http.h"
#include "common/pricing_client.h"
#include "common/spot_price_client.h"
#include "tests/support/subprocess.h"

namespace sg {
namespace {

using nlohmann::json;

constexpr char kSimKey[] = "AKIDPRICESIMTEST";
constexpr char kSimSecret[] = "prices/sim+Secret0123456789";

class PricesSim : public ::testing::Test {
 protected:
  PricesSim()
      : sim_("prices_sim.py", {"--region", "eu-west-3", "--pricing-region", "us-east-1",
                               "--access-key", kSimKey, "--secret-key", kSimSecret}) {
    sim_.Control("POST", "/_sim/prices", R"({
        "spot": [{"instance_type": "g5.xlarge", "availability_zone": "eu-west-3a", "price": "0.3012",
                  "timestamp": "2026-01-01T00:00:00Z"},
                 {"instance_type": "g5.xlarge", "availability_zone": "eu-west-3a", "price": "0.4523"},
                 {"instance_type": "g5.xlarge", "availability_zone": "eu-west-3b", "price": "0.9"}],
        "on_demand": [{"instance_type": "g5.xlarge", "region": "eu-west-3", "price": "1.224"}]})");
  }
  SpotPriceClient Spot(const std::string& secret = kSimSecret) {
    creds_ = std::make_unique<StaticCredentials>(AwsCredentials{kSimKey, secret, ""});
    SpotPriceClientOptions o;
    o.region = "eu-west-3";
    o.endpoint = sim_.endpoint();
    o.retry.base_delay = Duration(1);
    return SpotPriceClient(transport_, *creds_, SystemClock(), o);
  }
  PricingClient Pricing(const std::string& api_region = "us-east-1") {
    creds_ = std::make_unique<StaticCredentials>(AwsCredentials{kSimKey, kSimSecret, ""});
    PricingClientOptions o;
    o.api_region = api_region;
    o.endpoint = sim_.endpoint();
    o.retry.base_delay = Duration(1);
    return PricingClient(transport_, *creds_, SystemClock(), o);
  }
  json Calls() { return json::parse(sim_.Control("GET", "/_sim/calls")); }

  testing::ToolServer sim_;
  CurlTransport transport_;
  std::unique_ptr<StaticCredentials> creds_;
};

TEST_F(PricesSim, TheSpotPriceInEffectNowInTheZoneIsRead) {
  auto p = Spot().CurrentSpotPrice("g5.xlarge", "eu-west-3a");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_DOUBLE_EQ(p->usd_per_hour, 0.4523);  // the newer of the zone's two, not 3b's
  json calls = Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["service"], "ec2");
  EXPECT_EQ(calls[0]["region"], "eu-west-3");
  EXPECT_EQ(calls[0]["action"], "DescribeSpotPriceHistory");
  EXPECT_EQ(calls[0]["params"]["ProductDescription.1"], "Linux/UNIX");
  EXPECT_EQ(calls[0]["status"], 200);
}

TEST_F(PricesSim, ATypeWithoutASpotPriceThereIsNotFound) {
  auto p = Spot().CurrentSpotPrice("p5.48xlarge", "eu-west-3a");
  EXPECT_TRUE(p.status().Is(StatusCode::kNotFound)) << p.status().ToString();
}

TEST_F(PricesSim, AWrongSecretIsRefusedAsSignatureDoesNotMatch) {
  auto p = Spot("not-the-secret").CurrentSpotPrice("g5.xlarge", "eu-west-3a");
  EXPECT_TRUE(p.status().Is(StatusCode::kPermissionDenied)) << p.status().ToString();
  EXPECT_EQ(p.status().reason(), "SignatureDoesNotMatch");
  EXPECT_EQ(Calls().size(), 1u);
}

TEST_F(PricesSim, ABadInstanceTypeIsAValidationErrorNotRetried) {
  auto p = Spot().CurrentSpotPrice("not a type", "eu-west-3a");
  EXPECT_TRUE(p.status().Is(StatusCode::kInvalidArgument)) << p.status().ToString();
  EXPECT_EQ(p.status().reason(), "InvalidParameterValue");
  EXPECT_EQ(Calls().size(), 1u);
}

TEST_F(PricesSim, Ec2UnavailableIsRetried) {
  sim_.Control("POST", "/_sim/fault",
               R"({"action": "DescribeSpotPriceHistory", "status": 503, "code": "Unavailable"})");
  auto p = Spot().CurrentSpotPrice("g5.xlarge", "eu-west-3a");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  json calls = Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["code"], "Unavailable");
}

TEST_F(PricesSim, TheOnDemandPriceIsTheLinuxProductsNotADecoys) {
  auto p = Pricing().OnDemandPriceOf("g5.xlarge", "eu-west-3");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  // The decoys (Windows, dedicated, SQL, a reservation, another region) cost half.
  EXPECT_DOUBLE_EQ(p->usd_per_hour, 1.224);
  EXPECT_EQ(p->products, 1);
  json calls = Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["service"], "pricing");
  EXPECT_EQ(calls[0]["region"], "us-east-1");
  EXPECT_EQ(calls[0]["params"]["ServiceCode"], "AmazonEC2");
  EXPECT_EQ(calls[0]["params"]["Filters"].size(), 6u);
}

TEST_F(PricesSim, APricingCallSignedForAnotherRegionIsAnInvalidSignature) {
  auto p = Pricing("ap-south-1").OnDemandPriceOf("g5.xlarge", "eu-west-3");
  EXPECT_TRUE(p.status().Is(StatusCode::kPermissionDenied)) << p.status().ToString();
  EXPECT_EQ(p.status().reason(), "InvalidSignatureException");
  EXPECT_NE(p.status().message().find("region"), std::string::npos) << p.status().message();
}

TEST_F(PricesSim, AnEmptyFilterValueIsAnInvalidParameter) {
  auto p = Pricing().OnDemandPriceOf("", "eu-west-3");
  EXPECT_TRUE(p.status().Is(StatusCode::kInvalidArgument)) << p.status().ToString();
  EXPECT_EQ(p.status().reason(), "InvalidParameterException");
  EXPECT_EQ(Calls().size(), 1u);
}

TEST_F(PricesSim, PricingThrottlingIsRetried) {
  sim_.Control("POST", "/_sim/fault",
               R"({"action": "GetProducts", "status": 400, "code": "ThrottlingException"})");
  auto p = Pricing().OnDemandPriceOf("g5.xlarge", "eu-west-3");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Calls().size(), 2u);
}

}  // namespace
}  // namespace sg
