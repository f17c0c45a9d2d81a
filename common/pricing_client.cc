#include "common/pricing_client.h"

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace sg {
namespace {

// "1.0060000000" -> 1.006; nullopt unless a finite, non-negative number.
std::optional<double> UsdOf(const nlohmann::json& value) {
  if (!value.is_string()) return std::nullopt;
  const std::string text = value.get<std::string>();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < 0) {
    return std::nullopt;
  }
  return v;
}

// The hourly on-demand prices of one product (a PriceList entry).
std::vector<double> ProductPrices(const nlohmann::json& product) {
  std::vector<double> out;
  const nlohmann::json* terms = nullptr;
  if (auto t = product.find("terms"); t != product.end() && t->is_object()) {
    if (auto od = t->find("OnDemand"); od != t->end() && od->is_object()) terms = &*od;
  }
  if (!terms) return out;
  for (const auto& offer : terms->items()) {
    const nlohmann::json& term = offer.value();
    if (!term.is_object() || !term.contains("priceDimensions")) continue;
    const nlohmann::json& dims = term["priceDimensions"];
    if (!dims.is_object()) continue;
    for (const auto& rate : dims.items()) {
      const nlohmann::json& dim = rate.value();
      if (!dim.is_object() || !dim.contains("pricePerUnit")) continue;
      const nlohmann::json& per = dim["pricePerUnit"];
      if (!per.is_object() || !per.contains("USD")) continue;
      if (std::optional<double> usd = UsdOf(per["USD"])) out.push_back(*usd);
    }
  }
  return out;
}

std::string SkuOf(const nlohmann::json& product) {
  auto p = product.find("product");
  if (p == product.end() || !p->is_object()) return "";
  auto sku = p->find("sku");
  return sku != p->end() && sku->is_string() ? sku->get<std::string>() : "";
}

}  // namespace

std::string PricingApiRegion(const std::string& region) {
  if (region == "us-east-1" || region == "eu-central-1" || region == "ap-south-1") return region;
  if (region.starts_with("cn-")) return "cn-northwest-1";
  return "us-east-1";
}

std::string ResolvePricingEndpoint(const std::optional<std::string>& configured,
                                   const std::string& api_region,
                                   const std::map<std::string, std::string>& env) {
  return ResolveServiceEndpoint(configured, {"AWS_ENDPOINT_URL_PRICING", "AWS_ENDPOINT_URL"},
                                AwsDefaultEndpoint("api.pricing", api_region), env);
}

std::string OnDemandPriceQuery(const std::string& instance_type, const std::string& region) {
  nlohmann::ordered_json filters = nlohmann::ordered_json::array();
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, std::string>>{{"instanceType", instance_type},
                                                        {"regionCode", region},
                                                        {"operatingSystem", "Linux"},
                                                        {"tenancy", "Shared"},
                                                        {"preInstalledSw", "NA"},
                                                        {"capacitystatus", "Used"}}) {
    filters.push_back({{"Type", "TERM_MATCH"}, {"Field", field}, {"Value", value}});
  }
  const nlohmann::ordered_json body = {{"ServiceCode", "AmazonEC2"},
                                       {"Filters", std::move(filters)},
                                       {"FormatVersion", "aws_v1"},
                                       {"MaxResults", 100}};
  return body.dump();
}

StatusOr<OnDemandPrice> ParseOnDemandPrice(const std::string& body,
                                           const std::string& instance_type,
                                           const std::string& region) {
  const auto doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return Status::Corruption("GetProducts: the answer is not a JSON object");
  auto list = doc.find("PriceList");
  if (list == doc.end() || !list->is_array()) {
    return Status::Corruption("GetProducts: no PriceList array in the answer");
  }
  OnDemandPrice out{instance_type, region, 0, "", 0};
  std::optional<double> lowest;
  for (const nlohmann::json& entry : *list) {
    // Each product is a JSON document in a string, not an object.
    if (!entry.is_string())
      return Status::Corruption("GetProducts: a PriceList entry is not a string");
    const auto product = nlohmann::json::parse(entry.get<std::string>(), nullptr, false);
    if (!product.is_object()) {
      return Status::Corruption("GetProducts: a PriceList entry is not a JSON object");
    }
    ++out.products;
    for (double usd : ProductPrices(product)) {
      if (usd > 0 && (!lowest || usd < *lowest)) {
        lowest = usd;
        out.sku = SkuOf(product);
      }
    }
  }
  if (!lowest) {
    return Status::NotFound("the Price List has no on-demand price of " + instance_type +
                            " (Linux, shared tenancy) in " + region)
        .WithReason("NoOnDemandPrice");
  }
  out.usd_per_hour = *lowest;
  return out;
}

AwsErrorInfo PricingErrorOf(const HttpResponse& response) {
  static const std::map<long, std::string> kStatusCodes = {
      {400, "BadRequest"},
      {403, "AccessDeniedException"},
      {404, "NotFoundException"},
      {429, "ThrottlingException"},
      {500, "InternalErrorException"},
      {503, "ServiceUnavailableException"},
  };
  AwsErrorInfo e;
  const auto doc = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  std::string type = response.Header("x-amzn-errortype");
  if (doc.is_object()) {
    if (auto t = doc.find("__type"); t != doc.end() && t->is_string()) type = t->get<std::string>();
    for (const char* key : {"message", "Message"}) {
      if (auto m = doc.find(key); m != doc.end() && m->is_string() && e.message.empty()) {
        e.message = m->get<std::string>();
      }
    }
  }
  // "com.amazonaws.pricing#InvalidParameterException", or the header's
  // "InvalidParameterException:http://internal.amazon.com/...".
  if (size_t hash = type.rfind('#'); hash != std::string::npos) type = type.substr(hash + 1);
  if (size_t colon = type.find(':'); colon != std::string::npos) type = type.substr(0, colon);
  e.code = type;
  CompleteErrorInfo(e, response, kStatusCodes, "x-amzn-requestid");
  return e;
}

Outcome ClassifyPricingResponse(const StatusOr<HttpResponse>& response) {
  static const ErrorOutcomes kOutcomes = {
      .clock_skew = {"RequestExpired"},
      .throttled = {"ThrottlingException", "Throttling"},
      .server_error = {"InternalErrorException", "ServiceUnavailableException"},
      .server_failed = [](long status) { return status >= 500; }};
  return ClassifyAwsAnswer(response, PricingErrorOf, kOutcomes);
}

Status PricingErrorStatus(const AwsErrorInfo& error) {
  static const ErrorCodeGroups kCodes = {
      {StatusCode::kInvalidArgument,
       {"InvalidParameterException", "ValidationException", "ExpiredNextTokenException",
        "SerializationException", "UnknownOperationException"}},
      {StatusCode::kNotFound, {"NotFoundException"}},
      {StatusCode::kPermissionDenied,
       {"InvalidSignatureException", "UnrecognizedClientException", "IncompleteSignatureException",
        "MissingAuthenticationTokenException"}},
      {StatusCode::kUnavailable, {"InternalErrorException", "ServiceUnavailableException"}},
  };
  return AwsErrorStatus(AwsErrorCode(error, kCodes), "Price List GetProducts", error);
}

PricingClient::PricingClient(HttpTransport& transport, CredentialsProvider& credentials,
                             Clock& clock, PricingClientOptions options, UniformRandom random)
    : options_(std::move(options)),
      endpoint_(ResolvePricingEndpoint(
          options_.endpoint.empty() ? std::nullopt : std::optional(options_.endpoint),
          options_.api_region, {})),
      executor_(transport, credentials, clock,
                {"pricing", options_.api_region, "Price List", options_.retry}, std::move(random)) {
}

StatusOr<OnDemandPrice> PricingClient::OnDemandPriceOf(const std::string& instance_type,
                                                       const std::string& region) {
  SG_ASSIGN_OR_RETURN(SignedRequest request, PostTo(endpoint_, "Price List"));
  request.headers = {{"content-type", "application/x-amz-json-1.1"},
                     {"x-amz-target", std::string(kPricingTarget)}};
  request.body = OnDemandPriceQuery(instance_type, region);
  request.timeout = options_.timeout;
  request.what = "Price List GetProducts";
  AnswerRules rules;
  rules.classify = ClassifyPricingResponse;
  rules.error = [](const HttpResponse& resp) { return PricingErrorStatus(PricingErrorOf(resp)); };
  SG_ASSIGN_OR_RETURN(HttpResponse resp, executor_.Execute(std::move(request), rules));
  return ParseOnDemandPrice(resp.body, instance_type, region);
}

}  // namespace sg
