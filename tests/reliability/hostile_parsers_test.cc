// Hostile input at the parser level: one test for each product bug that
// fuzzing or the hostile-input tests found (docs/reliability.md, "Hostile input and fuzzing").
// Each of these crashed, hung, or was undefined behaviour before its fix.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent/run/interruption_monitor.h"
#include "agent/repo/manifest.h"
#include "common/aws_credentials.h"
#include "common/clock.h"
#include "common/s3_client.h"
#include "tests/support/fake_clock.h"
#include "tests/support/scripted_transport.h"

namespace sg::testing {
namespace {

using nlohmann::json;

json GoodManifest() {
  return json{{"format", "spotguard-snapshot/1"},
              {"job", "job"},
              {"seq", 7},
              {"generation", 1},
              {"created", "2026-11-22T08:20:31.412Z"},
              {"instance", "i-0123456789abcdef0"},
              {"files",
               {{{"path", "a.bin"},
                 {"size", 5},
                 {"mode", 420},
                 {"sha256", std::string(64, 'a')},
                 {"key", "snapshots/0000000007/files/a.bin.zst"},
                 {"stored_size", 18},
                 {"codec", "zstd"},
                 {"frame_size", 8388608},
                 {"frames", {18}}}}}};
}

StatusOr<Manifest> Parse(const json& j) { return ParseManifest(j.dump(), "job", 7); }

TEST(HostileManifest, TheSeedIsGood) { ASSERT_TRUE(Parse(GoodManifest()).ok()); }

// Was: j.value("format", "") threw json::type_error -> std::terminate.
TEST(HostileManifest, ANonStringFormatIsCorruptionNotACrash) {
  for (const json& format : {json(1), json::array(), json(nullptr), json::object()}) {
    json j = GoodManifest();
    j["format"] = format;
    auto m = Parse(j);
    ASSERT_FALSE(m.ok());
    EXPECT_TRUE(m.status().Is(StatusCode::kCorruption)) << m.status().ToString();
  }
}

// Was: get<uint64_t>() took -1 as 2^64-1 and 4.6e26 by an undefined conversion.
TEST(HostileManifest, NumbersMustBeWholeAndNonNegative) {
  for (const char* field : {"size", "mode", "stored_size", "frame_size"}) {
    for (const json& bad : {json(-1), json(4.6e26), json(2.5), json("5")}) {
      json j = GoodManifest();
      j["files"][0][field] = bad;
      auto m = Parse(j);
      EXPECT_FALSE(m.ok()) << field << " = " << bad.dump();
    }
  }
  json j = GoodManifest();
  j["files"][0]["frames"] = {-18};
  EXPECT_FALSE(Parse(j).ok());
  j = GoodManifest();
  j["seq"] = 7.0;
  EXPECT_FALSE(Parse(j).ok());
  j = GoodManifest();
  j["files"][0]["mode"] = (uint64_t{1} << 32) + 420;  // was truncated to 420
  EXPECT_FALSE(Parse(j).ok());
}

// Was: (size + frame_size - 1) / frame_size wrapped to 0 frames for 2^64-1.
TEST(HostileManifest, AFrameCountThatWouldWrapIsRefused) {
  json j = GoodManifest();
  j["files"][0]["size"] = ~uint64_t{0};
  j["files"][0]["frame_size"] = 2;
  j["files"][0]["frames"] = json::array();
  j["files"][0]["stored_size"] = 0;
  auto m = Parse(j);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("frames for"), std::string::npos) << m.status().ToString();
}

TEST(HostileManifest, FrameSizesThatWrapWhenAddedAreRefused) {
  json j = GoodManifest();
  j["files"][0]["size"] = 2 * 8388608;
  j["files"][0]["frames"] = {~uint64_t{0}, 19};  // adds up to 18 modulo 2^64
  auto m = Parse(j);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("do not add up"), std::string::npos);
}

// Was: years outside what system_clock holds overflowed (UBSan: signed overflow).
TEST(HostileTimes, YearsOutsideTheRangeAreRefused) {
  std::tm tm{};
  tm.tm_mday = 1;
  tm.tm_year = -954 - 1900;
  EXPECT_FALSE(WallTimeFromUtc(tm).has_value());
  tm.tm_year = 9999 - 1900;
  EXPECT_FALSE(WallTimeFromUtc(tm).has_value());
  tm.tm_year = 2026 - 1900;
  EXPECT_TRUE(WallTimeFromUtc(tm).has_value());
  EXPECT_FALSE(ParseIso8601("-954-01-01T00:00:00Z").ok());
  EXPECT_FALSE(ParseIso8601("9999-12-31T23:59:59Z").ok());
  EXPECT_TRUE(ParseIso8601("2026-11-22T08:22:00Z").ok());
  EXPECT_FALSE(ParseImdsEventTime("31 Dec 9999 23:59:59 GMT").ok());
  EXPECT_TRUE(ParseImdsEventTime("21 Jan 2019 09:00:43 GMT").ok());
  auto page = ParseListObjectsV2Xml(
      "<ListBucketResult><Contents><Key>k</Key><LastModified>-954-01-01T00:00:00"
      "</LastModified></Contents></ListBucketResult>",
      "test");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->objects.size(), 1u);
}

TEST(HostileS3Xml, MalformedAnswersAreCorruptionNamingTheRequest) {
  for (const char* body : {"", "not xml", "<ListBucketResult><Contents>", "<Other/>"}) {
    auto page = ParseListObjectsV2Xml(body, "ListObjectsV2 b");
    ASSERT_FALSE(page.ok()) << body;
    EXPECT_TRUE(page.status().Is(StatusCode::kCorruption));
    EXPECT_NE(page.status().message().find("ListObjectsV2 b"), std::string::npos);
  }
  EXPECT_FALSE(ParseInitiateMultipartUploadXml("<InitiateMultipartUploadResult/>", "x").ok());
  EXPECT_FALSE(ParseCompleteMultipartUploadXml("<Error><Code>X</Code></Error>", "x").ok());
  EXPECT_FALSE(
      ParseListMultipartUploadsXml("<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
                                   "</ListMultipartUploadsResult>")
          .ok());
  EXPECT_FALSE(
      ParseListPartsXml("<ListPartsResult><IsTruncated>true</IsTruncated></ListPartsResult>", "x")
          .ok());
  auto failed = ParseDeleteResultXml(
      "<DeleteResult><Error><Key>k</Key><Code>AccessDenied</Code></Error></DeleteResult>", "x");
  ASSERT_TRUE(failed.ok());
  ASSERT_TRUE(failed->has_value());
  EXPECT_EQ((*failed)->key, "k");
  EXPECT_EQ((*failed)->error.code, "AccessDenied");
}

class HostileS3Client : public ::testing::Test {
 public:
  std::unique_ptr<S3Client> Client() {
    S3ClientOptions o;
    o.endpoint = "http://127.0.0.1:9";
    o.retry.max_attempts = 1;
    return std::make_unique<S3Client>(transport_, creds_, clock_, o);
  }
  ScriptedTransport transport_;
  FakeClock clock_;
  StaticCredentials creds_{AwsCredentials{"AKID", "secret", ""}};
};

// Was: std::stoull threw std::invalid_argument out of GetObject and HeadObject.
TEST_F(HostileS3Client, AMalformedContentRangeOrLengthIsCorruptionNotAThrow) {
  auto client = Client();
  transport_.Reply(206, "abcde", {{"content-range", "bytes 0-4/lots"}});
  ObjectInfo info;
  auto got = client->GetObject("b", "k", ByteRange{0, 5}, &info);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(got.status().Is(StatusCode::kCorruption)) << got.status().ToString();
  transport_.Reply(200, "", {{"content-length", "12x"}});
  auto head = client->HeadObject("b", "k");
  ASSERT_FALSE(head.ok());
  EXPECT_TRUE(head.status().Is(StatusCode::kCorruption)) << head.status().ToString();
}

// Was: a server repeating its continuation token or markers looped forever.
TEST_F(HostileS3Client, AListingThatDoesNotAdvanceIsAnErrorNotALoop) {
  auto client = Client();
  transport_.forever = ScriptedTransport::Response(
      200,
      "<ListBucketResult><IsTruncated>true</IsTruncated>"
      "<NextContinuationToken>t</NextContinuationToken></ListBucketResult>");
  auto page = client->ListObjectsV2("b", "p/", "t");
  ASSERT_FALSE(page.ok());
  EXPECT_NE(page.status().message().find("does not advance"), std::string::npos);

  transport_.forever = ScriptedTransport::Response(
      200,
      "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated><NextKeyMarker>m"
      "</NextKeyMarker></ListMultipartUploadsResult>");
  auto uploads = client->ListMultipartUploads("b", "p/");
  ASSERT_FALSE(uploads.ok());
  EXPECT_NE(uploads.status().message().find("does not advance"), std::string::npos);
  EXPECT_LE(transport_.sent.size(), 4u);

  transport_.forever = ScriptedTransport::Response(
      200,
      "<ListPartsResult><IsTruncated>true</IsTruncated><NextPartNumberMarker>3"
      "</NextPartNumberMarker></ListPartsResult>");
  auto parts = client->ListParts("b", "k", "u");
  ASSERT_FALSE(parts.ok());
  EXPECT_NE(parts.status().message().find("does not advance"), std::string::npos);
}

TEST_F(HostileS3Client, KeysOutsideTheRequestedPrefixAreRefused) {
  auto client = Client();
  transport_.Reply(200,
                   "<ListBucketResult><Contents><Key>other/x</Key></Contents></ListBucketResult>");
  auto page = client->ListObjectsV2("b", "p/", "");
  ASSERT_FALSE(page.ok());
  EXPECT_NE(page.status().message().find("outside the requested prefix"), std::string::npos);
}

}  // namespace
}  // namespace sg::testing
