// The pure parts of the S3 client: addressing, error parsing and mapping,
// response classification, and multipart part sizing.
#include <gtest/gtest.h>

#include "common/s3_client.h"
#include "common/s3_multipart.h"

namespace sg {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

S3ClientOptions Aws(const std::string& region) {
  S3ClientOptions o;
  o.region = region;
  return o;
}

TEST(S3Address, AwsUsesVirtualHostedStyle) {
  const S3Address a = BuildS3Address(Aws("us-west-2"), "my-bucket", "dir/obj.bin", {});
  EXPECT_EQ(a.url, "https://my-bucket.s3.us-west-2.amazonaws.com/dir/obj.bin");
  EXPECT_EQ(a.host, "my-bucket.s3.us-west-2.amazonaws.com");
  EXPECT_EQ(a.path, "/dir/obj.bin");
}

TEST(S3Address, DottedBucketOnAwsUsesPathStyle) {
  const S3Address a = BuildS3Address(Aws("us-west-2"), "my.dotted.bucket", "k", {});
  EXPECT_EQ(a.url, "https://s3.us-west-2.amazonaws.com/my.dotted.bucket/k");
  EXPECT_EQ(a.host, "s3.us-west-2.amazonaws.com");
  EXPECT_EQ(a.path, "/my.dotted.bucket/k");
}

TEST(S3Address, ForcePathStyleOnAws) {
  S3ClientOptions o = Aws("eu-central-1");
  o.force_path_style = true;
  const S3Address a = BuildS3Address(o, "bkt", "k", {});
  EXPECT_EQ(a.url, "https://s3.eu-central-1.amazonaws.com/bkt/k");
  EXPECT_EQ(a.host, "s3.eu-central-1.amazonaws.com");
}

TEST(S3Address, CustomEndpointUsesPathStyle) {
  S3ClientOptions o;
  o.endpoint = "http://127.0.0.1:17480";
  const S3Address a = BuildS3Address(o, "bucket", "key", {});
  EXPECT_EQ(a.url, "http://127.0.0.1:17480/bucket/key");
  EXPECT_EQ(a.host, "127.0.0.1:17480");
  EXPECT_EQ(a.path, "/bucket/key");

  o.endpoint = "https://minio.example.com:9000/";
  const S3Address b = BuildS3Address(o, "bucket", "", {});
  EXPECT_EQ(b.url, "https://minio.example.com:9000/bucket");
  EXPECT_EQ(b.host, "minio.example.com:9000");
}

TEST(S3Address, KeysAreEncodedExactlyOnceAndKeepTheirSlashes) {
  const std::string key = "dir/a b+c/\xC3\xA9t\xC3\xA9 100%.txt";
  const S3Address a = BuildS3Address(Aws("us-east-1"), "bkt", key, {});
  EXPECT_EQ(a.url,
            "https://bkt.s3.us-east-1.amazonaws.com/dir/a%20b%2Bc/%C3%A9t%C3%A9%20100%25.txt");
  EXPECT_EQ(a.path, "/" + key) << "the path to sign is raw; SigV4 encodes it once";

  // Something that already looks encoded is a literal key, not an escape.
  EXPECT_EQ(BuildS3Address(Aws("us-east-1"), "bkt", "a%20b", {}).url,
            "https://bkt.s3.us-east-1.amazonaws.com/a%2520b");
  // Dot segments and double slashes are distinct keys, kept as they are.
  EXPECT_EQ(BuildS3Address(Aws("us-east-1"), "bkt", "a/./b//c", {}).url,
            "https://bkt.s3.us-east-1.amazonaws.com/a/./b//c");
}

TEST(S3Address, QueryIsSortedAndEncoded) {
  const S3Address a =
      BuildS3Address(Aws("us-east-1"), "bkt", "k", {{"uploadId", "x y/z"}, {"partNumber", "3"}});
  EXPECT_EQ(a.url, "https://bkt.s3.us-east-1.amazonaws.com/k?partNumber=3&uploadId=x%20y%2Fz");
  EXPECT_EQ(a.path, "/k") << "the query is not part of the path";

  const S3Address list = BuildS3Address(
      Aws("us-east-1"), "bkt", "", {{"prefix", "a+b"}, {"list-type", "2"}, {"max-keys", "10"}});
  EXPECT_EQ(list.url,
            "https://bkt.s3.us-east-1.amazonaws.com/?list-type=2&max-keys=10&prefix=a%2Bb");
  EXPECT_EQ(BuildS3Address(Aws("us-east-1"), "bkt", "k", {{"uploads", ""}}).url,
            "https://bkt.s3.us-east-1.amazonaws.com/k?uploads=");
}

TEST(S3PartSize, SmallObjectsUseTheMinimumPartSize) {
  EXPECT_EQ(ChoosePartSize(0, 8 * kMiB), 8 * kMiB);
  EXPECT_EQ(ChoosePartSize(1, 8 * kMiB), 8 * kMiB);
  EXPECT_EQ(ChoosePartSize(10 * 8 * kMiB, 8 * kMiB), 8 * kMiB);
  // Below S3's own 5 MiB minimum is never chosen.
  EXPECT_EQ(ChoosePartSize(100 * kMiB, 1 * kMiB), 5 * kMiB);
}

TEST(S3PartSize, ATebibyteFitsInTenThousandWholeMebibyteParts) {
  const uint64_t size = 1ull << 40;
  const uint64_t part = ChoosePartSize(size, 8 * kMiB);
  EXPECT_EQ(part % kMiB, 0u) << part;
  EXPECT_LE((size + part - 1) / part, kMaxParts) << part;
  EXPECT_EQ(part, 105 * kMiB) << "the smallest whole-MiB size that fits";
  // Just over 8 MiB x 10,000 needs the next MiB up.
  const uint64_t over = 8 * kMiB * kMaxParts + 1;
  EXPECT_EQ(ChoosePartSize(over, 8 * kMiB), 9 * kMiB);
  EXPECT_EQ(ChoosePartSize(8 * kMiB * kMaxParts, 8 * kMiB), 8 * kMiB);
}

// A store writer told the file's size: an 80 GiB file of frames that do
// not compress (8 MiB each, one part each at the 8 MiB floor) needed 10,240
// parts, over S3's 10,000, and failed to snapshot.
TEST(S3PartSize, AWriterToldTheSizeFitsItsObjectInTenThousandParts) {
  EXPECT_EQ(WriterPartSize(8 * kMiB, 0), 8 * kMiB) << "size not known: the floor";
  EXPECT_EQ(WriterPartSize(8 * kMiB, 1 * kMiB), 8 * kMiB);
  const uint64_t file = 80ull << 30;
  const uint64_t part = WriterPartSize(8 * kMiB, file);
  EXPECT_GT(part, 8 * kMiB);
  // Stored bytes may overrun the raw size a little; 1/32 more still fits.
  EXPECT_LE((file + file / 32) / part, kMaxParts) << part;
}

TEST(S3PartSize, NeverAboveFiveGibibytes) {
  EXPECT_EQ(ChoosePartSize(5ull << 40, 8 * kMiB), 525 * kMiB);  // S3's 5 TiB maximum object
  EXPECT_EQ(ChoosePartSize(100ull << 40, 8 * kMiB), kMaxPartSize);
  EXPECT_EQ(ChoosePartSize(1, 6ull << 30), kMaxPartSize);
}

TEST(S3ErrorXml, ReadsCodeMessageAndRequestId) {
  auto e = ParseS3ErrorXml(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message>"
      "<Key>a/b</Key><RequestId>4442587FB7D0A2F9</RequestId><HostId>xyz</HostId></Error>");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, "NoSuchKey");
  EXPECT_EQ(e->message, "The specified key does not exist.");
  EXPECT_EQ(e->request_id, "4442587FB7D0A2F9");
  EXPECT_EQ(e->http_status, 0) << "the status comes from the response, not the body";
}

TEST(S3ErrorXml, AnythingElseIsNotAnError) {
  EXPECT_FALSE(ParseS3ErrorXml("").has_value());
  EXPECT_FALSE(ParseS3ErrorXml("plain object bytes").has_value());
  EXPECT_FALSE(ParseS3ErrorXml("<ListBucketResult><Name>b</Name></ListBucketResult>").has_value());
  EXPECT_FALSE(ParseS3ErrorXml("<Error><Code>Broken").has_value()) << "malformed";
  EXPECT_FALSE(ParseS3ErrorXml("<Errors><Error><Code>X</Code></Error></Errors>").has_value())
      << "only a top-level <Error> is an S3 error";
}

TEST(S3ErrorStatus, MapsS3CodesToStatusCodesAndKeepsTheCodeAsReason) {
  const std::pair<const char*, StatusCode> cases[] = {
      {"NoSuchKey", StatusCode::kNotFound},
      {"NoSuchBucket", StatusCode::kNotFound},
      {"NoSuchUpload", StatusCode::kNotFound},
      {"AccessDenied", StatusCode::kPermissionDenied},
      {"SignatureDoesNotMatch", StatusCode::kPermissionDenied},
      {"InvalidAccessKeyId", StatusCode::kPermissionDenied},
      {"ExpiredToken", StatusCode::kPermissionDenied},
      {"PreconditionFailed", StatusCode::kPreconditionFailed},
      {"InvalidRange", StatusCode::kOutOfRange},
      {"SlowDown", StatusCode::kUnavailable},
      {"InternalError", StatusCode::kUnavailable},
      {"RequestTimeout", StatusCode::kUnavailable},
      {"EntityTooSmall", StatusCode::kInvalidArgument},
      {"InvalidPart", StatusCode::kInvalidArgument},
      {"BadDigest", StatusCode::kCorruption},
  };
  for (const auto& [code, expected] : cases) {
    const Status s = S3ErrorStatus("GetObject", "bkt/k", {400, code, "", ""});
    EXPECT_EQ(s.code(), expected) << code;
    EXPECT_EQ(s.reason(), code);
  }
}

TEST(S3ErrorStatus, UnknownCodesAreUnavailableOnlyForServerErrors) {
  EXPECT_EQ(S3ErrorStatus("PutObject", "b/k", {502, "BadGateway", "", ""}).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(S3ErrorStatus("PutObject", "b/k", {400, "WeirdThing", "", ""}).code(),
            StatusCode::kIOError);
}

TEST(S3ErrorStatus, MessageNamesOperationResourceCodeStatusAndRequestId) {
  const Status s =
      S3ErrorStatus("DeleteObject", "bkt/a/b", {403, "AccessDenied", "Access Denied", "R1"});
  EXPECT_EQ(s.message(),
            "DeleteObject bkt/a/b: AccessDenied: Access Denied (HTTP 403, request id R1)");
}

StatusOr<HttpResponse> Answer(long status, std::string body = "") {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

std::string Err(const std::string& code) { return "<Error><Code>" + code + "</Code></Error>"; }

TEST(S3Classify, SortsAnswersIntoRetryOutcomes) {
  EXPECT_EQ(ClassifyS3Response(Answer(200)), Outcome::kSuccess);
  EXPECT_EQ(ClassifyS3Response(Answer(206, "bytes")), Outcome::kSuccess);
  EXPECT_EQ(ClassifyS3Response(Answer(200, Err("InternalError"))), Outcome::kSuccess)
      << "a 2xx body may be the user's own XML";
  EXPECT_EQ(ClassifyS3Response(Status::Unavailable("reset")), Outcome::kTransient);
  // An untrusted certificate is not a network blip: no retry makes it trusted.
  EXPECT_EQ(ClassifyS3Response(Status::PermissionDenied("certificate")), Outcome::kFatal);
  EXPECT_EQ(ClassifyS3Response(Answer(503, Err("SlowDown"))), Outcome::kThrottled);
  EXPECT_EQ(ClassifyS3Response(Answer(429)), Outcome::kThrottled);
  EXPECT_EQ(ClassifyS3Response(Answer(500, Err("InternalError"))), Outcome::kServerError);
  EXPECT_EQ(ClassifyS3Response(Answer(503)), Outcome::kServerError);
  EXPECT_EQ(ClassifyS3Response(Answer(400, Err("RequestTimeout"))), Outcome::kServerError);
  EXPECT_EQ(ClassifyS3Response(Answer(403, Err("RequestTimeTooSkewed"))), Outcome::kClockSkew);
  EXPECT_EQ(ClassifyS3Response(Answer(403, Err("AccessDenied"))), Outcome::kFatal);
  EXPECT_EQ(ClassifyS3Response(Answer(404)), Outcome::kFatal);
  EXPECT_EQ(ClassifyS3Response(Answer(412, Err("PreconditionFailed"))), Outcome::kFatal);
  // A conditional write racing another one: AWS asks for a retry.
  EXPECT_EQ(ClassifyS3Response(Answer(409, Err("ConditionalRequestConflict"))),
            Outcome::kServerError);
  // 501 and 505 will not get better by asking again.
  EXPECT_EQ(ClassifyS3Response(Answer(501, Err("NotImplemented"))), Outcome::kFatal);
  EXPECT_EQ(ClassifyS3Response(Answer(505)), Outcome::kFatal);
  EXPECT_EQ(ClassifyS3Response(Answer(502)), Outcome::kServerError);
  EXPECT_EQ(ClassifyS3Response(Answer(504)), Outcome::kServerError);
}

}  // namespace
}  // namespace sg
