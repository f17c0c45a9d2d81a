// The composition root for AWS: the long-lived parts every AWS client of one
// command shares (the HTTP transport, the IMDS client, the credentials chain,
// the clock), built once from the values the config provides and the
// environment. The s3:// store and the Auto Scaling client take them from
// here, so they share connections, one credentials cache and one IMDS token.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/aws_credentials.h"
#include "common/clock.h"
#include "common/http.h"
#include "common/imds_client.h"

namespace sg {

// What the config says about AWS; everything else comes from `env`.
struct AwsSettings {
  std::map<std::string, std::string> env;  // the process environment: AWS_* variables
  std::optional<std::string> region;       // else AWS_REGION, AWS_DEFAULT_REGION, the instance
  // The metadata service; "" or the default address: AWS_EC2_METADATA_SERVICE_ENDPOINT, else
  // the default. AWS_EC2_METADATA_DISABLED=true means no IMDS client at all.
  std::string imds_endpoint;
  Clock* clock = nullptr;  // null: the system clock
};

// The region named by `configured` (non-empty), AWS_REGION or
// AWS_DEFAULT_REGION, in that order; "" when none is.
std::string ConfiguredRegion(const std::optional<std::string>& configured,
                             const std::map<std::string, std::string>& env);
// The region in the instance identity document; "" when `imds` is null, the
// environment disables IMDS, or the document does not say.
std::string InstanceRegion(MetadataService* imds, const std::map<std::string, std::string>& env);

class AwsEnvironment {
 public:
  explicit AwsEnvironment(AwsSettings settings);
  AwsEnvironment(const AwsEnvironment&) = delete;
  AwsEnvironment& operator=(const AwsEnvironment&) = delete;

  const AwsSettings& settings() const { return settings_; }
  const std::map<std::string, std::string>& env() const { return settings_.env; }
  Clock& clock() { return clock_; }
  // libcurl, trusting AWS_CA_BUNDLE besides the system's CAs.
  HttpTransport& transport() { return transport_; }
  // Null when AWS_EC2_METADATA_DISABLED=true.
  ImdsClient* imds() { return imds_.get(); }
  // The chain of aws_credentials.h; the instance role through imds().
  DefaultCredentialsChain& credentials() { return credentials_; }
  // ConfiguredRegion, else InstanceRegion (remembered once found); "" when
  // neither says.
  std::string Region();

 private:
  const AwsSettings settings_;
  Clock& clock_;
  CurlTransport transport_;
  std::unique_ptr<ImdsClient> imds_;
  DefaultCredentialsChain credentials_;
  std::mutex mu_;
  std::optional<std::string> region_;
};

}  // namespace sg
