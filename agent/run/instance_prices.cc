#include "agent/run/instance_prices.h"

#include <memory>

#include "common/aws_environment.h"
#include "common/log.h"

namespace sg {
namespace {

// One try and two retries within about a second: the price is a nicety, and
// the next attempt reads it again.
RetryPolicy PriceRetry() {
  RetryPolicy p;
  p.max_attempts = 3;
  p.base_delay = Duration(200);
  return p;
}

nlohmann::ordered_json PriceError(const Status& st, std::string_view source) {
  return {{"error", std::string(st.message())}, {"source", std::string(source)}};
}

}  // namespace

PriceReaders AwsPriceReaders(AwsEnvironment& aws, Clock& clock, const std::string& region) {
  SpotPriceClientOptions ec2;
  ec2.region = region;
  ec2.endpoint = ResolveEc2Endpoint(std::nullopt, region, aws.env());
  ec2.retry = PriceRetry();
  ec2.timeout = std::chrono::milliseconds(10'000);
  PricingClientOptions pricing;
  pricing.api_region = PricingApiRegion(region);
  pricing.endpoint = ResolvePricingEndpoint(std::nullopt, pricing.api_region, aws.env());
  pricing.retry = PriceRetry();
  pricing.timeout = std::chrono::milliseconds(10'000);
  // Shared by the readers' copies: the thread that reads keeps them alive.
  auto spot = std::make_shared<SpotPriceClient>(aws.transport(), aws.credentials(), clock, ec2);
  auto on_demand =
      std::make_shared<PricingClient>(aws.transport(), aws.credentials(), clock, pricing);
  PriceReaders readers;
  readers.spot = [spot](const std::string& type, const std::string& zone) {
    return spot->CurrentSpotPrice(type, zone);
  };
  readers.on_demand = [on_demand](const std::string& type, const std::string& in_region) {
    return on_demand->OnDemandPriceOf(type, in_region);
  };
  return readers;
}

nlohmann::ordered_json ReadInstancePrices(const PriceReaders& readers,
                                          const InstanceIdentity& identity) {
  nlohmann::ordered_json d = {{"instance_type", identity.instance_type},
                              {"availability_zone", identity.availability_zone},
                              {"region", identity.region}};
  if (readers.spot) {
    StatusOr<SpotPrice> spot = readers.spot(identity.instance_type, identity.availability_zone);
    d["spot"] = spot.ok() ? nlohmann::ordered_json{{"usd_per_hour", spot->usd_per_hour},
                                                   {"source", "ec2"},
                                                   {"since", spot->timestamp}}
                          : PriceError(spot.status(), "ec2");
  }
  if (readers.on_demand) {
    StatusOr<OnDemandPrice> od = readers.on_demand(identity.instance_type, identity.region);
    d["on_demand"] = od.ok() ? nlohmann::ordered_json{{"usd_per_hour", od->usd_per_hour},
                                                      {"source", "pricing"},
                                                      {"sku", od->sku}}
                             : PriceError(od.status(), "pricing");
  }
  return d;
}

std::string PriceReadWarning(const nlohmann::ordered_json& details) {
  std::string out;
  for (const auto& [key, name] : {std::pair{"spot", "spot"}, std::pair{"on_demand", "on-demand"}}) {
    auto it = details.find(key);
    if (it == details.end() || !it->contains("error")) continue;
    out += (out.empty() ? "" : "; ") + std::string(name) + ": " + (*it)["error"].get<std::string>();
  }
  if (out.empty()) return out;
  return "reading the prices of " + details.value("instance_type", std::string("?")) + " failed (" +
         out +
         "); report prices those hours with the `prices` config key, if set (docs/operations.md, "
         "\"Cost\")";
}

void InstancePriceRead::Start(PriceReaders readers, const InstanceIdentity& identity,
                              Clock::WallTime now) {
  if (identity.instance_type.empty() || identity.availability_zone.empty() ||
      identity.region.empty()) {
    return;
  }
  began_ = now;
  call_.Start(
      [readers = std::move(readers), identity] { return ReadInstancePrices(readers, identity); });
}

std::optional<InstancePriceRead::Result> InstancePriceRead::Take(std::chrono::milliseconds wait) {
  if (!call_.busy()) return std::nullopt;
  std::optional<nlohmann::ordered_json> done = call_.WaitFor(wait);
  if (!done) return std::nullopt;
  return Result{std::move(*done), began_};
}

std::optional<PriceReaders> AgentPriceReaders(const std::optional<PriceReaders>& ports,
                                              AwsEnvironment* aws, Clock& clock,
                                              const std::optional<InstanceIdentity>& identity) {
  if (!ports && !aws) return std::nullopt;  // no AWS parts (a drill)
  if (!identity) {
    LogWarn("the instance is unknown (not on EC2, or its metadata service did not answer): its "
            "prices are not read, and report prices its hours with the `prices` config key only");
    return std::nullopt;
  }
  if (ports) return *ports;
  return AwsPriceReaders(*aws, clock, identity->region);
}

}  // namespace sg
