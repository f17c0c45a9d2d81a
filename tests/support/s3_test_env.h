// The S3 server the s3-labelled tests use: the one the SPOTGUARD_TEST_S3_*
// variables name (scripts/s3-server.sh start prints them). Tests fail, not
// skip, when they are missing.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/s3_store.h"

namespace sg::testing {

struct S3TestEnv {
  std::string endpoint, access_key, secret_key, bucket, region;
  // The variables an S3Store reads (AWS_ACCESS_KEY_ID, ...), for this server.
  std::map<std::string, std::string> AwsEnv() const;
};

// Reads the variables; adds a test failure naming the missing ones.
bool LoadS3TestEnv(S3TestEnv* out);

// An s3:// store on the test bucket under `prefix` (bucket created if absent).
std::unique_ptr<S3Store> OpenTestS3Store(const S3TestEnv& env, const std::string& prefix);

// "host:port" of an endpoint URL: what tests/tools/fault_proxy.py's
// --upstream takes.
std::string ProxyUpstream(const std::string& endpoint);

}  // namespace sg::testing
