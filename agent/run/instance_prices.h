// The prices of the instance an attempt runs on, for `report`'s cost
// (docs/operations.md, "Cost"): EC2's spot price of its type in its zone and
// the Price List's on-demand price of its type in its region, read once per
// attempt on a thread of their own, once the instance is known, and written
// into the ledger as the attempt's "prices" event. A price that cannot be
// read (no permission, no answer, not on EC2) is a warning, never a failure:
// nothing waits for these reads, neither the trainer nor a notice.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "agent/trainer/job_ports.h"
#include "common/background_call.h"
#include "common/clock.h"
#include "common/imds_client.h"

namespace sg {

class AwsEnvironment;

// The EC2 client of `region` (the instance's) and the Price List client of
// its API region, over the command's transport and credentials (endpoints:
// AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL_PRICING, AWS_ENDPOINT_URL, else
// AWS's). Each call of the readers makes its request with a short retry.
PriceReaders AwsPriceReaders(AwsEnvironment& aws, Clock& clock, const std::string& region);

// The readers an agent reads its prices with: the ports' (tests), else the
// AWS clients of the instance's region; nullopt when there are no AWS parts
// (a drill), or when the instance is unknown (logged: report then prices its
// hours with the `prices` config key only). One node's and a group node's.
std::optional<PriceReaders> AgentPriceReaders(const std::optional<PriceReaders>& ports,
                                              AwsEnvironment* aws, Clock& clock,
                                              const std::optional<InstanceIdentity>& identity);

// Reads both prices of `identity`'s instance; the "prices" event's details:
// "instance_type", "availability_zone", "region", and "spot" and
// "on_demand", each {"usd_per_hour", "source": "ec2" | "pricing", ...} or
// {"error", "source"}.
nlohmann::ordered_json ReadInstancePrices(const PriceReaders& readers,
                                          const InstanceIdentity& identity);

// The warning an operator gets for the prices that could not be read; ""
// when both were.
std::string PriceReadWarning(const nlohmann::ordered_json& details);

// The reads of one attempt, off the caller's loop.
class InstancePriceRead {
 public:
  // `run_inline`: the reads run at Start on the caller's thread (tests on a
  // fake clock).
  explicit InstancePriceRead(bool run_inline) : call_(run_inline) {}

  // Starts the reads of `identity`'s instance at `now`; nothing when its
  // type, zone or region is unknown.
  void Start(PriceReaders readers, const InstanceIdentity& identity, Clock::WallTime now);
  // Once, when the reads have ended: their details and when they began (the
  // event's time, so that a late result never lengthens the attempt).
  // Never blocks; `wait` > 0 waits that long for reads still running.
  struct Result {
    nlohmann::ordered_json details;
    Clock::WallTime began;
  };
  std::optional<Result> Take(std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // The reads were started and their result not taken: their thread uses
  // the readers' clients.
  bool running() const { return call_.busy(); }

 private:
  BackgroundCall<nlohmann::ordered_json> call_;
  Clock::WallTime began_{};
};

}  // namespace sg
