// The doctor against a real S3 server: credentials from the environment,
// listing, put and delete, create-only and If-Match (the gateway honours both
// on PutObject), clock skew from the probe's Last-Modified, and no probe left.
#include <gtest/gtest.h>

#include "agent/config/config.h"
#include "agent/cli/doctor_command.h"
#include "common/files.h"
#include "tests/e2e/e2e_base.h"
#include "tests/support/s3_test_env.h"
#include "tests/support/temp_dir.h"

namespace sg::testing {
namespace {

class S3Doctor : public E2EBase {
 protected:
  void SetUp() override { UseS3("doctor-tests"); }
  const DoctorCheck* Find(const std::vector<DoctorCheck>& checks, const std::string& name) {
    for (const DoctorCheck& c : checks) {
      if (c.name == name) return &c;
    }
    return nullptr;
  }

};

TEST_F(S3Doctor, EveryStoreCheckPassesOnTheGatewayAndNoProbeIsLeft) {
  auto checks = CheckStore(*store_, "job", SystemClock());
  ASSERT_EQ(checks.size(), 5u);
  for (const DoctorCheck& c : checks) EXPECT_EQ(c.state, CheckState::kOk) << FormatCheck(c);
  auto left = ListAll(*store_, "job/.doctor/");
  ASSERT_TRUE(left.ok()) << left.status().ToString();
  EXPECT_TRUE(left->empty());
}

TEST_F(S3Doctor, TheWholeDoctorNamesTheCredentialSourceAndNeverTheSecret) {
  Config config;
  config.job = "job";
  config.store = "s3://" + s3_.bucket + "/" + prefix_;
  config.endpoint = s3_.endpoint;
  config.region = s3_.region;
  config.checkpoint_dir = dir_.path();
  config.imds.endpoint = "http://127.0.0.1:1";
  std::vector<std::string> lines;
  auto checks = RunDoctorChecks(config, s3_.AwsEnv(),
                                [&](const DoctorCheck& c) { lines.push_back(FormatCheck(c)); });
  ASSERT_EQ(lines.size(), checks.size());
  const DoctorCheck* creds = Find(checks, "credentials");
  ASSERT_NE(creds, nullptr);
  EXPECT_EQ(creds->state, CheckState::kOk) << creds->detail;
  EXPECT_NE(creds->detail.find("from environment"), std::string::npos) << creds->detail;
  for (const char* name : {"store", "write", "create-only", "if-match", "clock"}) {
    const DoctorCheck* c = Find(checks, name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_EQ(c->state, CheckState::kOk) << FormatCheck(*c);
  }
  // AWS_EC2_METADATA_DISABLED=true is part of the test environment.
  EXPECT_EQ(Find(checks, "imds")->state, CheckState::kWarn);
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find(s3_.secret_key), std::string::npos) << line;
  }
  auto left = ListAll(*store_, "job/.doctor/");
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
}

TEST_F(S3Doctor, AWrongSecretFailsTheStoreChecksWithAccessDenied) {
  Config config;
  config.job = "job";
  config.store = "s3://" + s3_.bucket + "/" + prefix_;
  config.endpoint = s3_.endpoint;
  config.region = s3_.region;
  config.imds.endpoint = "http://127.0.0.1:1";
  auto env = s3_.AwsEnv();
  env["AWS_SECRET_ACCESS_KEY"] = "wrong-secret-for-doctor";
  auto checks = RunDoctorChecks(config, env, nullptr);
  EXPECT_EQ(Find(checks, "credentials")->state, CheckState::kOk);  // found, not yet proven
  const DoctorCheck* store = Find(checks, "store");
  EXPECT_EQ(store->state, CheckState::kFail);
  EXPECT_NE(store->detail.find("SignatureDoesNotMatch"), std::string::npos) << store->detail;
  EXPECT_EQ(Find(checks, "create-only")->state, CheckState::kFail);
  for (const DoctorCheck& c : checks) {
    EXPECT_EQ(c.detail.find("wrong-secret-for-doctor"), std::string::npos) << FormatCheck(c);
  }
}

}  // namespace
}  // namespace sg::testing
