// Uploads a file to S3 through spotguard's transfer engine and downloads it
// back, printing one JSON line per direction. Used by bench/sections/01-limits.sh;
// reads the server from SPOTGUARD_TEST_S3_* like the tests.
//
//   s3_transfer_bench FILE KEY [PARTS_IN_FLIGHT]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/s3_file_transfer.h"
#include "common/log.h"
#include "common/s3_store.h"

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s FILE KEY [PARTS_IN_FLIGHT]\n", argv[0]);
    return 2;
  }
  sg::InitLogging(sg::LogLevel::kWarn, sg::LogFormat::kText);  // stdout carries the result
  const std::string file = argv[1], key = argv[2];
  sg::TransferOptions options;
  if (argc > 3) options.parts_in_flight = std::atoi(argv[3]);

  sg::S3StoreOptions store_options;
  sg::AwsSettings aws;
  aws.env = {{"AWS_ACCESS_KEY_ID", Env("SPOTGUARD_TEST_S3_ACCESS_KEY")},
             {"AWS_SECRET_ACCESS_KEY", Env("SPOTGUARD_TEST_S3_SECRET_KEY")},
             {"AWS_EC2_METADATA_DISABLED", "true"}};
  store_options.aws = std::make_shared<sg::AwsEnvironment>(aws);
  store_options.endpoint = Env("SPOTGUARD_TEST_S3_ENDPOINT");
  const std::string bucket = Env("SPOTGUARD_TEST_S3_BUCKET");
  auto store = sg::S3Store::Open(*sg::ParseStoreUrl("s3://" + bucket), store_options);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  sg::S3Client& client = (*store)->client();

  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  auto etag = sg::UploadFile(client, bucket, key, file, options);
  const double up = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!etag.ok()) {
    std::fprintf(stderr, "upload: %s\n", etag.status().ToString().c_str());
    return 1;
  }
  t0 = Clock::now();
  auto bytes = sg::DownloadFile(client, bucket, key, file + ".back", options);
  const double down = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!bytes.ok()) {
    std::fprintf(stderr, "download: %s\n", bytes.status().ToString().c_str());
    return 1;
  }
  std::printf("{\"tool\":\"spotguard\",\"bytes\":%llu,\"upload_s\":%.3f,\"download_s\":%.3f}\n",
              static_cast<unsigned long long>(*bytes), up, down);
  return 0;
}
