#include "common/aws_environment.h"

#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace sg {
namespace {

CurlTransport::Options TransportOptions(const std::map<std::string, std::string>& env) {
  CurlTransport::Options o;
  o.ca_bundle = EnvOr(env, "AWS_CA_BUNDLE");
  return o;
}

std::unique_ptr<ImdsClient> MakeImds(HttpTransport& transport, Clock& clock,
                                     const AwsSettings& settings) {
  // The default address counts as not configured, so that
  // AWS_EC2_METADATA_SERVICE_ENDPOINT can still name another.
  const std::string configured =
      settings.imds_endpoint == kDefaultImdsEndpoint ? "" : settings.imds_endpoint;
  ImdsClient::Options options = ImdsOptionsFromEnvironment(configured, settings.env);
  if (options.disabled) return nullptr;
  return std::make_unique<ImdsClient>(transport, clock, options);
}

}  // namespace

std::string ConfiguredRegion(const std::optional<std::string>& configured,
                             const std::map<std::string, std::string>& env) {
  std::string region = configured.value_or("");
  for (const char* name : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    if (region.empty()) region = EnvOr(env, name);
  }
  return region;
}

std::string InstanceRegion(MetadataService* imds, const std::map<std::string, std::string>& env) {
  if (imds == nullptr || ToLower(EnvOr(env, "AWS_EC2_METADATA_DISABLED")) == "true") return "";
  auto doc = imds->Get("dynamic/instance-identity/document");
  if (!doc.ok()) return "";
  auto j = nlohmann::json::parse(*doc, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("region") && j["region"].is_string()) {
    return j["region"].get<std::string>();
  }
  return "";
}

AwsEnvironment::AwsEnvironment(AwsSettings settings)
    : settings_(std::move(settings)),
      clock_(settings_.clock ? *settings_.clock : SystemClock()),
      transport_(TransportOptions(settings_.env)),
      imds_(MakeImds(transport_, clock_, settings_)),
      credentials_(settings_.env, transport_, clock_, imds_.get()) {}

std::string AwsEnvironment::Region() {
  std::lock_guard<std::mutex> lock(mu_);
  if (region_) return *region_;
  std::string region = ConfiguredRegion(settings_.region, settings_.env);
  if (region.empty()) region = InstanceRegion(imds_.get(), settings_.env);
  // Not found is not remembered: the metadata service may answer later.
  if (!region.empty()) region_ = region;
  return region;
}

}  // namespace sg
