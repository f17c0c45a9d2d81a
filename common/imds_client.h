// The EC2 instance metadata service, IMDSv2: a session token from
// PUT /latest/api/token, sent on every GET, renewed before it expires and
// after any 401. MetadataService is the seam; ImdsClient the real one.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/http.h"
#include "common/status.h"

namespace sg {

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
    std::string endpoint = "http://169.254.169.254";
    std::chrono::seconds token_ttl{21600};
    std::chrono::milliseconds timeout{1000};
    // The token is renewed this long before it would expire.
    std::chrono::seconds refresh_margin{60};
  };

  ImdsClient(HttpTransport& transport, Clock& clock, Options options);
  StatusOr<std::string> Get(std::string_view path) override;

 private:
  StatusOr<std::string> Token(bool force_new);

  HttpTransport& transport_;
  Clock& clock_;
  const Options options_;
  std::mutex mu_;
  std::string token_;  // never logged
  Clock::MonoTime token_expiry_{};
};

}  // namespace sg
