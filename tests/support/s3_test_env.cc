#include "tests/support/s3_test_env.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace sg::testing {

std::map<std::string, std::string> S3TestEnv::AwsEnv() const {
  return {{"AWS_ACCESS_KEY_ID", access_key},
          {"AWS_SECRET_ACCESS_KEY", secret_key},
          {"AWS_REGION", region},
          {"AWS_EC2_METADATA_DISABLED", "true"}};
}

bool LoadS3TestEnv(S3TestEnv* out) {
  std::string missing;
  auto get = [&](const char* name, std::string* value, const char* fallback = nullptr) {
    const char* v = std::getenv(name);
    if (v && *v) {
      *value = v;
    } else if (fallback) {
      *value = fallback;
    } else {
      missing += std::string(missing.empty() ? "" : ", ") + name;
    }
  };
  get("SPOTGUARD_TEST_S3_ENDPOINT", &out->endpoint);
  get("SPOTGUARD_TEST_S3_ACCESS_KEY", &out->access_key);
  get("SPOTGUARD_TEST_S3_SECRET_KEY", &out->secret_key);
  get("SPOTGUARD_TEST_S3_BUCKET", &out->bucket);
  get("SPOTGUARD_TEST_S3_REGION", &out->region, "us-east-1");
  if (!missing.empty()) {
    ADD_FAILURE() << "no S3 server for this test: " << missing
                  << " unset (run: eval \"$(scripts/s3-server.sh start)\")";
    return false;
  }
  return true;
}

std::unique_ptr<S3Store> OpenTestS3Store(const S3TestEnv& env, const std::string& prefix) {
  S3StoreOptions options;
  AwsSettings aws;
  aws.env = env.AwsEnv();
  options.aws = std::make_shared<AwsEnvironment>(aws);
  options.endpoint = env.endpoint;
  auto store = S3Store::Open(
      *ParseStoreUrl("s3://" + env.bucket + (prefix.empty() ? "" : "/" + prefix)), options);
  if (!store.ok()) {
    ADD_FAILURE() << store.status().ToString();
    return nullptr;
  }
  Status created = (*store)->client().CreateBucket(env.bucket);
  if (!created.ok()) ADD_FAILURE() << "create bucket " << env.bucket << ": " << created.ToString();
  return std::move(*store);
}

std::string ProxyUpstream(const std::string& endpoint) {
  std::string host = endpoint.substr(endpoint.find("://") + 3);
  while (!host.empty() && host.back() == '/') host.pop_back();
  return host;
}

}  // namespace sg::testing
