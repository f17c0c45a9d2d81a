// The EC2 instance metadata service, IMDSv2: a session token from
// PUT /latest/api/token, sent on every GET, renewed before it expires and
// after any 401. MetadataService is the seam; ImdsClient the real one.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/duration.h"
#include "common/http.h"
#include "common/retry.h"
#include "common/status.h"

namespace sg {

inline constexpr std::string_view kDefaultImdsEndpoint = "http://169.254.169.254";

// Status::reason() of the Unavailable errors ImdsClient returns, so callers
// can tell "nothing answered" (not on EC2, or the service is down) from "the
// service answered with an error" and from "switched off".
inline constexpr std::string_view kImdsNoAnswer = "imds-no-answer";
inline constexpr std::string_view kImdsHttpError = "imds-http-error";
inline constexpr std::string_view kImdsDisabled = "imds-disabled";

class MetadataService {
 public:
  virtual ~MetadataService() = default;
  // GET /latest/<path> ("meta-data/spot/instance-action",
  // "dynamic/instance-identity/document"). NotFound on 404 (for notices this
  // means "none"); Unavailable when the service did not answer properly.
  virtual StatusOr<std::string> Get(std::string_view path) = 0;
};

class ImdsClient final : public MetadataService {
 public:
  struct Options {
    std::string endpoint{kDefaultImdsEndpoint};
    std::chrono::seconds token_ttl{21600};
    std::chrono::milliseconds timeout{1000};
    // The token is renewed this long before it would expire.
    std::chrono::seconds refresh_margin{60};
    // Requests that got no HTTP answer at all (refused, reset, timed out) are
    // tried up to this many times in all, with full-jitter backoff between
    // tries; an HTTP error status is never retried here.
    int max_attempts = 3;
    Duration base_delay{100};
    Duration max_delay{1000};
    // AWS_EC2_METADATA_DISABLED=true: every Get fails (reason kImdsDisabled)
    // without sending anything.
    bool disabled = false;
  };

  // Backoff waits go through `clock`; `random` picks the jitter.
  ImdsClient(HttpTransport& transport, Clock& clock, Options options,
             UniformRandom random = DefaultRandom());
  StatusOr<std::string> Get(std::string_view path) override;

  const Options& options() const { return options_; }

 private:
  StatusOr<std::string> Token(bool force_new);
  // Sends `request`, retrying only when no HTTP response arrived.
  StatusOr<HttpResponse> Send(const HttpRequest& request, std::string_view what);

  HttpTransport& transport_;
  Clock& clock_;
  const Options options_;
  const UniformRandom random_;
  std::mutex mu_;
  std::string token_;  // never logged
  Clock::MonoTime token_expiry_{};
};

// Client options as the AWS tools read them: `configured` (non-empty) wins,
// then AWS_EC2_METADATA_SERVICE_ENDPOINT, then http://169.254.169.254;
// AWS_EC2_METADATA_DISABLED=true (any case) disables the client. A trailing
// '/' is dropped from the endpoint.
ImdsClient::Options ImdsOptionsFromEnvironment(std::string_view configured,
                                               const std::map<std::string, std::string>& env);

// What an instance is, from dynamic/instance-identity/document and
// meta-data/instance-life-cycle.
struct InstanceIdentity {
  std::string instance_id;
  std::string region;
  std::string availability_zone;
  std::string instance_type;
  std::string life_cycle;  // "spot", "on-demand", ...; "" when the service has no such item
};

// Errors from `imds` pass through; a document that is not JSON or lacks one
// of the four fields is Corruption naming what was wrong.
StatusOr<InstanceIdentity> ReadInstanceIdentity(MetadataService& imds);

// Parses the identity document's text (exposed for tests).
StatusOr<InstanceIdentity> ParseIdentityDocument(std::string_view body);

// At most `max_chars` of `bytes`, printable ASCII kept and everything else
// written as \xNN, so a garbled body can go into a log line or an error.
std::string PrintableExcerpt(std::string_view bytes, size_t max_chars = 60);

}  // namespace sg
