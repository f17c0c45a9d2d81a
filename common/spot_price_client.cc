#include "common/spot_price_client.h"

#include <cmath>
#include <cstdlib>
#include <pugixml.hpp>

namespace sg {
namespace {

AwsErrorInfo Ec2ErrorOf(const HttpResponse& resp) {
  static const std::map<long, std::string> kStatusCodes = {
      {400, "BadRequest"}, {401, "AuthFailure"},   {403, "UnauthorizedOperation"},
      {429, "Throttling"}, {500, "InternalError"}, {503, "Unavailable"},
  };
  AwsErrorInfo e = ParseEc2ErrorXml(resp.body).value_or(AwsErrorInfo{});
  CompleteErrorInfo(e, resp, kStatusCodes, "x-amzn-requestid");
  return e;
}

std::string Ec2Text(const pugi::xml_node& node, const char* name) {
  return node.child(name).text().as_string();
}

// "0.452300" -> 0.4523; nullopt unless a finite, non-negative number.
std::optional<double> PriceOf(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < 0) {
    return std::nullopt;
  }
  return v;
}

}  // namespace

std::string ResolveEc2Endpoint(const std::optional<std::string>& configured,
                               const std::string& region,
                               const std::map<std::string, std::string>& env) {
  return ResolveServiceEndpoint(configured, {"AWS_ENDPOINT_URL_EC2", "AWS_ENDPOINT_URL"},
                                AwsDefaultEndpoint("ec2", region), env);
}

QueryParameters SpotPriceQuery(const std::string& instance_type, const std::string& zone,
                               Clock::WallTime at) {
  const std::string when = FormatUtc(at, /*millis=*/false);
  return {{"InstanceType.1", instance_type},
          {"ProductDescription.1", std::string(kLinuxProduct)},
          {"AvailabilityZone", zone},
          {"StartTime", when},
          {"EndTime", when}};
}

StatusOr<std::vector<SpotPrice>> ParseSpotPriceHistoryXml(const std::string& body) {
  pugi::xml_document doc;
  if (auto r = doc.load_buffer(body.data(), body.size()); !r) {
    return Status::Corruption("DescribeSpotPriceHistory: the answer is not XML (" +
                              std::string(r.description()) + ")");
  }
  const pugi::xml_node root = doc.child("DescribeSpotPriceHistoryResponse");
  if (!root) {
    return Status::Corruption("DescribeSpotPriceHistory: no DescribeSpotPriceHistoryResponse");
  }
  std::vector<SpotPrice> out;
  for (pugi::xml_node item : root.child("spotPriceHistorySet").children("item")) {
    SpotPrice p;
    p.instance_type = Ec2Text(item, "instanceType");
    p.availability_zone = Ec2Text(item, "availabilityZone");
    p.product_description = Ec2Text(item, "productDescription");
    p.timestamp = Ec2Text(item, "timestamp");
    const std::string price = Ec2Text(item, "spotPrice");
    const std::optional<double> usd = PriceOf(price);
    if (!usd) {
      return Status::Corruption("DescribeSpotPriceHistory: spotPrice \"" + price +
                                "\" is not a price");
    }
    p.usd_per_hour = *usd;
    out.push_back(std::move(p));
  }
  return out;
}

std::optional<AwsErrorInfo> ParseEc2ErrorXml(std::string_view body) {
  if (body.find("<Response") == std::string_view::npos) return std::nullopt;
  pugi::xml_document doc;
  if (!doc.load_buffer(body.data(), body.size())) return std::nullopt;
  const pugi::xml_node top = doc.child("Response");
  const pugi::xml_node err = top.child("Errors").child("Error");
  if (!err) return std::nullopt;
  AwsErrorInfo e;
  e.code = Ec2Text(err, "Code");
  e.message = Ec2Text(err, "Message");
  e.request_id = Ec2Text(top, "RequestID");
  return e;
}

Outcome ClassifyEc2Response(const StatusOr<HttpResponse>& response) {
  static const ErrorOutcomes kOutcomes = {
      .clock_skew = {"RequestExpired"},
      .throttled = {"RequestLimitExceeded", "Throttling", "ThrottlingException"},
      .server_error = {"InternalError", "Unavailable", "ServiceUnavailable"},
      .server_failed = [](long status) { return status >= 500; }};
  return ClassifyAwsAnswer(response, Ec2ErrorOf, kOutcomes);
}

Status Ec2ErrorStatus(std::string_view action, const AwsErrorInfo& error) {
  static const ErrorCodeGroups kCodes = {
      {StatusCode::kInvalidArgument,
       {"InvalidParameterValue", "InvalidParameterCombination", "InvalidParameter",
        "MissingParameter", "UnknownParameter", "InvalidAction", "MalformedQueryString",
        "ValidationError"}},
      {StatusCode::kPermissionDenied, {"AuthFailure", "Blocked"}},
      {StatusCode::kUnavailable, {"RequestLimitExceeded", "Unavailable"}},
  };
  return AwsErrorStatus(AwsErrorCode(error, kCodes), "EC2 " + std::string(action), error);
}

SpotPriceClient::SpotPriceClient(HttpTransport& transport, CredentialsProvider& credentials,
                                 Clock& clock, SpotPriceClientOptions options, UniformRandom random)
    : options_(std::move(options)),
      endpoint_(ResolveEc2Endpoint(
          options_.endpoint.empty() ? std::nullopt : std::optional(options_.endpoint),
          options_.region, {})),
      clock_(clock),
      executor_(transport, credentials, clock, {"ec2", options_.region, "EC2", options_.retry},
                std::move(random)) {}

StatusOr<SpotPrice> SpotPriceClient::CurrentSpotPrice(const std::string& instance_type,
                                                      const std::string& zone) {
  constexpr std::string_view kAction = "DescribeSpotPriceHistory";
  SG_ASSIGN_OR_RETURN(SignedRequest request, PostTo(endpoint_, "EC2"));
  request.headers = {{"content-type", "application/x-www-form-urlencoded; charset=utf-8"}};
  request.body =
      BuildQueryBody(kAction, kEc2ApiVersion, SpotPriceQuery(instance_type, zone, clock_.Now()));
  request.timeout = options_.timeout;
  request.what = "EC2 " + std::string(kAction);
  AnswerRules rules;
  rules.classify = ClassifyEc2Response;
  rules.error = [kAction](const HttpResponse& resp) {
    return Ec2ErrorStatus(kAction, Ec2ErrorOf(resp));
  };
  SG_ASSIGN_OR_RETURN(HttpResponse resp, executor_.Execute(std::move(request), rules));
  SG_ASSIGN_OR_RETURN(std::vector<SpotPrice> prices, ParseSpotPriceHistoryXml(resp.body));
  std::optional<SpotPrice> newest;
  for (SpotPrice& p : prices) {
    if (p.instance_type != instance_type || p.availability_zone != zone) continue;
    // ISO 8601 times of one service, in one format: their order is the time's.
    if (!newest || p.timestamp > newest->timestamp) newest = std::move(p);
  }
  if (!newest) {
    return Status::NotFound("EC2 has no spot price of " + instance_type + " (" +
                            std::string(kLinuxProduct) + ") in " + zone)
        .WithReason("NoSpotPrice");
  }
  return std::move(*newest);
}

}  // namespace sg
