#include "common/store_url.h"

#include <gtest/gtest.h>

#include "common/s3_store.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

TEST(StoreUrl, ParsesS3BucketAndPrefix) {
  auto u = ParseStoreUrl("s3://my-bucket/spotguard/runs/");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, StoreUrl::Scheme::kS3);
  EXPECT_EQ(u->bucket, "my-bucket");
  EXPECT_EQ(u->prefix, "spotguard/runs");
  EXPECT_EQ(u->ToString(), "s3://my-bucket/spotguard/runs");
  EXPECT_EQ(ParseStoreUrl("s3://bucket")->prefix, "");
}

TEST(StoreUrl, ParsesAbsoluteFilePaths) {
  auto u = ParseStoreUrl("file:///var/lib/spotguard/store/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scheme, StoreUrl::Scheme::kFile);
  EXPECT_EQ(u->path, "/var/lib/spotguard/store");
}

TEST(StoreUrl, RefusesWhatS3OrTheFilesystemWouldRefuse) {
  struct Case {
    const char* url;
    const char* says;
  } cases[] = {{"gs://bucket/x", "unsupported scheme \"gs\""},
               {"/var/lib/x", "not a store URL"},
               {"file://relative/path", "absolute path"},
               {"s3://Upper/x", "lower-case"},
               {"s3://ab", "3 to 63"},
               {"s3://-bucket", "begin and end"},
               {"s3://bucket/a//b", "empty, '.' or '..' segment"},
               {"s3://bucket/../b", "empty, '.' or '..' segment"}};
  for (const Case& c : cases) {
    auto r = ParseStoreUrl(c.url);
    ASSERT_FALSE(r.ok()) << c.url;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
  }
}

TEST(StoreUrl, OpensAFileStore) {
  testing::TempDir dir;
  auto file = OpenObjectStore(*ParseStoreUrl("file://" + dir.Join("s")), S3StoreOptions{});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->Describe(), "file://" + dir.Join("s"));
}

TEST(StoreUrl, OpensAnS3StoreWithoutTouchingTheNetwork) {
  S3StoreOptions options;
  options.aws = std::make_shared<AwsEnvironment>(AwsSettings{});
  options.endpoint = "http://127.0.0.1:9";
  auto s3 = OpenObjectStore(*ParseStoreUrl("s3://bucket/x"), options);
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  EXPECT_EQ((*s3)->Describe(), "s3://bucket/x");
}

// A writer's bytes (snapshot frames) go unsigned where the way keeps them
// intact, and with their SHA-256 signed over plain http to another host.
TEST(StoreUrl, AnS3StoreSignsItsWritersBodiesOnlyOverPlainHttpToAnotherHost) {
  for (const auto& [endpoint, kind] :
       std::vector<std::pair<std::string, BodyCheck::Kind>>{
           {"http://127.0.0.1:9", BodyCheck::Kind::kUnsigned},
           {"https://minio.internal:9000", BodyCheck::Kind::kUnsigned},
           {"http://10.1.2.3:9000", BodyCheck::Kind::kSigned}}) {
    S3StoreOptions options;
    options.aws = std::make_shared<AwsEnvironment>(AwsSettings{});
    options.endpoint = endpoint;
    auto s3 = S3Store::Open(*ParseStoreUrl("s3://bucket/x"), options);
    ASSERT_TRUE(s3.ok()) << s3.status().ToString();
    EXPECT_EQ((*s3)->writer_check().kind, kind) << endpoint;
  }
}

TEST(StoreUrl, AnS3StoreWithoutARegionSaysHowToSetOne) {
  S3StoreOptions options;
  AwsSettings aws;
  aws.env = {{"AWS_EC2_METADATA_DISABLED", "true"}};
  options.aws = std::make_shared<AwsEnvironment>(aws);
  auto s3 = OpenObjectStore(*ParseStoreUrl("s3://bucket/x"), options);
  ASSERT_FALSE(s3.ok());
  EXPECT_NE(s3.status().message().find("AWS_REGION"), std::string::npos) << s3.status().message();
}

TEST(StoreUrl, AnS3StoreIsNeverOpenedWithAwsPartsOfItsOwn) {
  S3StoreOptions options;
  options.endpoint = "http://127.0.0.1:9";
  auto s3 = OpenObjectStore(*ParseStoreUrl("s3://bucket/x"), options);
  ASSERT_FALSE(s3.ok());
  EXPECT_TRUE(s3.status().Is(StatusCode::kInvalidArgument)) << s3.status().ToString();
}

}  // namespace
}  // namespace sg
