// What an S3 store learns from the instance: its region from the identity
// document and its credentials from the instance role, through the IMDS
// simulator.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/aws_credentials.h"
#include "common/clock.h"
#include "common/http.h"
#include "common/imds_client.h"
#include "common/s3_store.h"
#include "tests/support/subprocess.h"

namespace sg {
namespace {

class AwsFromInstance : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(sim_.endpoint().empty());
    ImdsClient::Options options;
    options.endpoint = sim_.endpoint();
    imds_ = std::make_unique<ImdsClient>(transport_, SystemClock(), options);
  }
  testing::ImdsSimulator sim_;
  CurlTransport transport_;
  std::unique_ptr<ImdsClient> imds_;
};

TEST_F(AwsFromInstance, RegionComesFromTheIdentityDocument) {
  sim_.Control("POST", "/_sim/identity", R"({"region": "eu-central-1"})");
  S3TargetSettings options;
  auto target = ResolveS3Target(options, imds_.get());
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  EXPECT_EQ(target->region, "eu-central-1");
  EXPECT_EQ(target->endpoint, "");
}

TEST_F(AwsFromInstance, ConfiguredAndEnvironmentRegionsComeFirst) {
  S3TargetSettings options;
  options.env = {{"AWS_REGION", "ap-south-1"}};
  EXPECT_EQ(ResolveS3Target(options, imds_.get())->region, "ap-south-1");
  options.region = "us-west-2";
  EXPECT_EQ(ResolveS3Target(options, imds_.get())->region, "us-west-2");
}

TEST_F(AwsFromInstance, MetadataDisabledMeansNoRegionFromTheInstance) {
  S3TargetSettings options;
  options.env = {{"AWS_EC2_METADATA_DISABLED", "true"}};
  auto target = ResolveS3Target(options, imds_.get());
  EXPECT_TRUE(target.status().Is(StatusCode::kInvalidArgument)) << target.status().ToString();
}

TEST_F(AwsFromInstance, EndpointVariablesAreHonouredInOrder) {
  S3TargetSettings options;
  options.env = {{"AWS_ENDPOINT_URL", "http://general:1"}, {"AWS_ENDPOINT_URL_S3", "http://s3:2/"}};
  auto target = ResolveS3Target(options, nullptr);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->endpoint, "http://s3:2");
  EXPECT_EQ(target->region, "us-east-1") << "custom endpoints default to us-east-1";
  options.endpoint = "https://configured:3";
  EXPECT_EQ(ResolveS3Target(options, nullptr)->endpoint, "https://configured:3");
}

TEST_F(AwsFromInstance, InstanceRoleCredentialsAreFetchedWithAToken) {
  sim_.Control(
      "POST", "/_sim/credentials",
      R"({"role": "trainer", "AccessKeyId": "ASIAROLEKEY", "SecretAccessKey": "role-secret",
                   "Token": "role-session-token"})");
  DefaultCredentialsChain chain({{"HOME", "/nonexistent"}}, transport_, SystemClock(), imds_.get());
  auto creds = chain.Get();
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ(creds->access_key_id, "ASIAROLEKEY");
  EXPECT_EQ(creds->secret_access_key, "role-secret");
  EXPECT_EQ(creds->session_token, "role-session-token");
  EXPECT_EQ(chain.source(), "instance role trainer");
  auto log = nlohmann::json::parse(sim_.Control("GET", "/_sim/requests"));
  for (const auto& r : log) {
    if (r["method"] == "GET") {
      EXPECT_EQ(r["token"], "valid") << r.dump();
    }
  }
}

TEST_F(AwsFromInstance, NoRoleIsAClearError) {
  sim_.Control("POST", "/_sim/credentials", R"({"role": null})");
  DefaultCredentialsChain chain({{"HOME", "/nonexistent"}}, transport_, SystemClock(), imds_.get());
  auto creds = chain.Get();
  ASSERT_FALSE(creds.ok());
  EXPECT_NE(creds.status().message().find("instance role"), std::string::npos)
      << creds.status().message();
}

}  // namespace
}  // namespace sg
