// SpotPriceClient (EC2 DescribeSpotPriceHistory) and PricingClient (Price
// List GetProducts) against a scripted transport: the exact requests (form
// body, JSON body, target header, SigV4 scope), the answers read (the newest
// spot price of the type and zone; the on-demand price inside a PriceList
// entry that is a JSON string), the errors of each protocol and their
// retries, and where requests go.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/pricing_client.h"
#include "common/spot_price_client.h"
#include "tests/support/fake_clock.h"
#include "tests/support/scripted_transport.h"

namespace sg {
namespace {

using testing::ScriptedTransport;
using testing::SentHeader;

constexpr char kPriceKey[] = "AKIDEXAMPLE";
constexpr char kPriceSecret[] = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

std::string SpotItem(const std::string& type, const std::string& zone, const std::string& price,
                     const std::string& time) {
  return "<item><instanceType>" + type +
         "</instanceType><productDescription>Linux/UNIX"
         "</productDescription><spotPrice>" +
         price + "</spotPrice><timestamp>" + time + "</timestamp><availabilityZone>" + zone +
         "</availabilityZone></item>";
}

std::string SpotAnswer(const std::string& items) {
  return "<DescribeSpotPriceHistoryResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
         "<requestId>r-1</requestId><spotPriceHistorySet>" +
         items + "</spotPriceHistorySet><nextToken/></DescribeSpotPriceHistoryResponse>";
}

std::string Ec2Error(const std::string& code, const std::string& message) {
  return "<Response><Errors><Error><Code>" + code + "</Code><Message>" + message +
         "</Message></Error></Errors><RequestID>req-9</RequestID></Response>";
}

// A PriceList entry as the service sends it: a product document in a string.
std::string PriceProduct(const std::string& sku, const std::string& usd) {
  nlohmann::json p;
  p["product"]["sku"] = sku;
  p["product"]["attributes"]["instanceType"] = "g5.xlarge";
  nlohmann::json& term = p["terms"]["OnDemand"][sku + ".JRTCKXETXF"];
  term["priceDimensions"][sku + ".JRTCKXETXF.6YS6EN2CT7"]["unit"] = "Hrs";
  term["priceDimensions"][sku + ".JRTCKXETXF.6YS6EN2CT7"]["pricePerUnit"]["USD"] = usd;
  return p.dump();
}

std::string PriceListAnswer(const std::vector<std::string>& products) {
  return nlohmann::json({{"FormatVersion", "aws_v1"}, {"PriceList", products}}).dump();
}

class PriceClientsTest : public ::testing::Test {
 protected:
  PriceClientsTest() { clock_.SetNow(Clock::WallTime(std::chrono::seconds(1772368496))); }
  SpotPriceClient Spot(std::string region = "eu-west-1", std::string endpoint = "") {
    SpotPriceClientOptions o;
    o.region = std::move(region);
    o.endpoint = std::move(endpoint);
    o.retry.max_attempts = 3;
    return SpotPriceClient(transport_, creds_, clock_, o, [] { return 0.5; });
  }
  PricingClient Pricing(std::string api_region = "us-east-1", std::string endpoint = "") {
    PricingClientOptions o;
    o.api_region = std::move(api_region);
    o.endpoint = std::move(endpoint);
    o.retry.max_attempts = 3;
    return PricingClient(transport_, creds_, clock_, o, [] { return 0.5; });
  }

  ScriptedTransport transport_;
  StaticCredentials creds_{AwsCredentials{kPriceKey, kPriceSecret, ""}};
  testing::FakeClock clock_;
};

TEST_F(PriceClientsTest, SpotPriceAsksForTheTypeInTheZoneAsLinuxAtThisSecond) {
  transport_.Reply(
      200, SpotAnswer(SpotItem("g5.xlarge", "eu-west-1b", "0.452300", "2026-03-01T11:00:00.000Z")));
  auto p = Spot().CurrentSpotPrice("g5.xlarge", "eu-west-1b");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_DOUBLE_EQ(p->usd_per_hour, 0.4523);
  ASSERT_EQ(transport_.sent.size(), 1u);
  const HttpRequest& r = transport_.sent[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.url, "https://ec2.eu-west-1.amazonaws.com/");
  EXPECT_EQ(r.body,
            "Action=DescribeSpotPriceHistory&Version=2016-11-15&InstanceType.1=g5.xlarge"
            "&ProductDescription.1=Linux%2FUNIX&AvailabilityZone=eu-west-1b"
            "&StartTime=2026-03-01T12%3A34%3A56Z&EndTime=2026-03-01T12%3A34%3A56Z");
  EXPECT_EQ(SentHeader(r, "content-type"), "application/x-www-form-urlencoded; charset=utf-8");
  EXPECT_NE(SentHeader(r, "authorization")
                .find("Credential=AKIDEXAMPLE/20260301/eu-west-1/ec2/aws4_request"),
            std::string::npos)
      << SentHeader(r, "authorization");
}

TEST_F(PriceClientsTest, TheNewestSpotPriceOfThatTypeAndZoneIsTaken) {
  transport_.Reply(
      200, SpotAnswer(SpotItem("g5.xlarge", "eu-west-1a", "0.100000", "2026-03-01T12:00:00.000Z") +
                      SpotItem("g5.xlarge", "eu-west-1b", "0.400000", "2026-03-01T09:00:00.000Z") +
                      SpotItem("g5.xlarge", "eu-west-1b", "0.420000", "2026-03-01T10:00:00.000Z")));
  auto p = Spot().CurrentSpotPrice("g5.xlarge", "eu-west-1b");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_DOUBLE_EQ(p->usd_per_hour, 0.42);
  EXPECT_EQ(p->timestamp, "2026-03-01T10:00:00.000Z");
}

TEST_F(PriceClientsTest, NoSpotPriceIsNotFound) {
  transport_.Reply(200, SpotAnswer(""));
  auto p = Spot().CurrentSpotPrice("p5.48xlarge", "eu-west-1b");
  EXPECT_TRUE(p.status().Is(StatusCode::kNotFound)) << p.status().ToString();
  EXPECT_EQ(p.status().reason(), "NoSpotPrice");
}

TEST_F(PriceClientsTest, ASpotPriceThatIsNoNumberIsCorruption) {
  transport_.Reply(
      200, SpotAnswer(SpotItem("g5.xlarge", "eu-west-1b", "cheap", "2026-03-01T10:00:00.000Z")));
  auto p = Spot().CurrentSpotPrice("g5.xlarge", "eu-west-1b");
  EXPECT_TRUE(p.status().Is(StatusCode::kCorruption)) << p.status().ToString();
}

TEST_F(PriceClientsTest, AnEc2PermissionErrorIsNotRetriedAndCarriesTheCode) {
  transport_.Reply(
      403, Ec2Error("UnauthorizedOperation", "You are not authorized to perform this operation."));
  auto p = Spot().CurrentSpotPrice("g5.xlarge", "eu-west-1b");
  EXPECT_TRUE(p.status().Is(StatusCode::kPermissionDenied)) << p.status().ToString();
  EXPECT_EQ(p.status().reason(), "UnauthorizedOperation");
  EXPECT_NE(p.status().message().find("req-9"), std::string::npos) << p.status().message();
  EXPECT_EQ(transport_.sent.size(), 1u);
}

TEST_F(PriceClientsTest, Ec2ThrottlingIsRetried) {
  transport_.Reply(503, Ec2Error("RequestLimitExceeded", "Request limit exceeded."));
  transport_.Reply(200,
                   SpotAnswer(SpotItem("g5.xlarge", "eu-west-1b", "0.5", "2026-03-01T10:00:00Z")));
  auto p = Spot().CurrentSpotPrice("g5.xlarge", "eu-west-1b");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(transport_.sent.size(), 2u);
}

TEST_F(PriceClientsTest, AnInvalidParameterIsInvalidArgument) {
  transport_.Reply(400, Ec2Error("InvalidParameterValue", "Invalid value 'x' for InstanceType."));
  auto p = Spot().CurrentSpotPrice("x", "eu-west-1b");
  EXPECT_TRUE(p.status().Is(StatusCode::kInvalidArgument)) << p.status().ToString();
  EXPECT_EQ(p.status().reason(), "InvalidParameterValue");
}

TEST(PriceEndpoints, ResolveLikeTheAwsTools) {
  const std::map<std::string, std::string> env = {{"AWS_ENDPOINT_URL_EC2", "http://ec2.local:1/"},
                                                  {"AWS_ENDPOINT_URL_PRICING", "http://p.local:2"},
                                                  {"AWS_ENDPOINT_URL", "http://all.local:3"}};
  EXPECT_EQ(ResolveEc2Endpoint(std::nullopt, "us-east-1", env), "http://ec2.local:1");
  EXPECT_EQ(ResolvePricingEndpoint(std::nullopt, "us-east-1", env), "http://p.local:2");
  const std::map<std::string, std::string> all = {{"AWS_ENDPOINT_URL", "http://all.local:3"}};
  EXPECT_EQ(ResolveEc2Endpoint(std::nullopt, "us-east-1", all), "http://all.local:3");
  EXPECT_EQ(ResolvePricingEndpoint(std::nullopt, "us-east-1", all), "http://all.local:3");
  EXPECT_EQ(ResolveEc2Endpoint(std::nullopt, "cn-north-1", {}),
            "https://ec2.cn-north-1.amazonaws.com.cn");
  EXPECT_EQ(ResolvePricingEndpoint(std::nullopt, PricingApiRegion("eu-west-3"), {}),
            "https://api.pricing.us-east-1.amazonaws.com");
  EXPECT_EQ(PricingApiRegion("ap-south-1"), "ap-south-1");
  EXPECT_EQ(PricingApiRegion("eu-central-1"), "eu-central-1");
  EXPECT_EQ(PricingApiRegion("cn-north-1"), "cn-northwest-1");
}

TEST_F(PriceClientsTest, GetProductsSendsTheSixFiltersAsJson11ToThePricingService) {
  transport_.Reply(200, PriceListAnswer({PriceProduct("SKU1", "1.0060000000")}));
  auto p = Pricing().OnDemandPriceOf("g5.xlarge", "eu-west-3");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_DOUBLE_EQ(p->usd_per_hour, 1.006);
  EXPECT_EQ(p->sku, "SKU1");
  const HttpRequest& r = transport_.sent.at(0);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.url, "https://api.pricing.us-east-1.amazonaws.com/");
  EXPECT_EQ(SentHeader(r, "x-amz-target"), "AWSPriceListService.GetProducts");
  EXPECT_EQ(SentHeader(r, "content-type"), "application/x-amz-json-1.1");
  EXPECT_NE(SentHeader(r, "authorization").find("/20260301/us-east-1/pricing/aws4_request"),
            std::string::npos);
  const nlohmann::json body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["ServiceCode"], "AmazonEC2");
  std::map<std::string, std::string> filters;
  for (const auto& f : body["Filters"]) {
    EXPECT_EQ(f["Type"], "TERM_MATCH");
    filters[f["Field"]] = f["Value"];
  }
  EXPECT_EQ(filters, (std::map<std::string, std::string>{{"instanceType", "g5.xlarge"},
                                                         {"regionCode", "eu-west-3"},
                                                         {"operatingSystem", "Linux"},
                                                         {"tenancy", "Shared"},
                                                         {"preInstalledSw", "NA"},
                                                         {"capacitystatus", "Used"}}));
}

TEST_F(PriceClientsTest, TheLowestNonZeroPriceOfTheProductsIsTaken) {
  transport_.Reply(
      200, PriceListAnswer({PriceProduct("RESERVED", "0.0000000000"),
                            PriceProduct("B", "1.2000000000"), PriceProduct("A", "1.0060000000")}));
  auto p = Pricing().OnDemandPriceOf("g5.xlarge", "us-east-1");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_DOUBLE_EQ(p->usd_per_hour, 1.006);
  EXPECT_EQ(p->sku, "A");
  EXPECT_EQ(p->products, 3);
}

TEST_F(PriceClientsTest, APriceListEntryMustBeAJsonString) {
  transport_.Reply(
      200,
      nlohmann::json({{"PriceList", {nlohmann::json::parse(PriceProduct("A", "1.0"))}}}).dump());
  auto p = Pricing().OnDemandPriceOf("g5.xlarge", "us-east-1");
  EXPECT_TRUE(p.status().Is(StatusCode::kCorruption)) << p.status().ToString();
}

TEST_F(PriceClientsTest, NoProductIsNotFound) {
  transport_.Reply(200, PriceListAnswer({}));
  auto p = Pricing().OnDemandPriceOf("g5.xlarge", "us-east-1");
  EXPECT_TRUE(p.status().Is(StatusCode::kNotFound)) << p.status().ToString();
  EXPECT_EQ(p.status().reason(), "NoOnDemandPrice");
}

TEST_F(PriceClientsTest, APricingAccessDeniedIsNotRetried) {
  transport_.Reply(400, R"({"__type":"com.amazonaws.pricing#AccessDeniedException",)"
                        R"("Message":"User is not authorized to perform: pricing:GetProducts"})");
  auto p = Pricing().OnDemandPriceOf("g5.xlarge", "us-east-1");
  EXPECT_TRUE(p.status().Is(StatusCode::kPermissionDenied)) << p.status().ToString();
  EXPECT_EQ(p.status().reason(), "AccessDeniedException");
  EXPECT_NE(p.status().message().find("pricing:GetProducts"), std::string::npos);
  EXPECT_EQ(transport_.sent.size(), 1u);
}

TEST_F(PriceClientsTest, PricingThrottlingIsRetriedAndTheHeaderNamesTheError) {
  transport_.Reply(400, "", {{"x-amzn-errortype", "ThrottlingException:http://internal/"}});
  transport_.Reply(200, PriceListAnswer({PriceProduct("A", "2.5")}));
  auto p = Pricing().OnDemandPriceOf("g5.xlarge", "us-east-1");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_DOUBLE_EQ(p->usd_per_hour, 2.5);
  EXPECT_EQ(transport_.sent.size(), 2u);
  HttpResponse bad;
  bad.status = 403;
  bad.body = R"({"__type":"InvalidSignatureException","message":"no match"})";
  EXPECT_EQ(PricingErrorOf(bad).code, "InvalidSignatureException");
  EXPECT_TRUE(PricingErrorStatus(PricingErrorOf(bad)).Is(StatusCode::kPermissionDenied));
}

TEST_F(PriceClientsTest, AnEndpointThatIsNoUrlIsRefusedWithoutSending) {
  EXPECT_TRUE(Spot("us-east-1", "ec2.example.com")
                  .CurrentSpotPrice("a.b", "z")
                  .status()
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(Pricing("us-east-1", "pricing.example.com")
                  .OnDemandPriceOf("a.b", "r")
                  .status()
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(transport_.sent.empty());
}

}  // namespace
}  // namespace sg
