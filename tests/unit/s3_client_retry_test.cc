// S3Client's retry loop against a scripted transport and a fake clock: how
// many attempts each kind of answer gets, exactly how long it waits between
// them (full jitter with a fixed "random" number), the retry budget, clock
// skew correction, and that every attempt is signed afresh.
#include <gtest/gtest.h>

#include <cmath>
#include <ctime>
#include <deque>
#include <memory>
#include <optional>
#include <set>

#include "common/crypto.h"
#include "common/s3_client.h"
#include "common/sigv4.h"
#include "common/strings.h"
#include "tests/support/fake_clock.h"
#include "tests/support/scripted_transport.h"

namespace sg {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

using testing::RecordingClock;
using testing::ScriptedTransport;

std::string ErrorXml(const std::string& code, const std::string& extra = "") {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + code +
         "</Code><Message>message for " + code + "</Message>" + extra +
         "<RequestId>REQ123</RequestId></Error>";
}

// Every value of header `name` (case-insensitive).
std::vector<std::string> HeaderValues(const HttpRequest& r, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& [k, v] : r.headers) {
    if (ToLower(k) == ToLower(name)) out.push_back(v);
  }
  return out;
}

std::string HeaderOf(const HttpRequest& r, const std::string& name) {
  auto values = HeaderValues(r, name);
  return values.empty() ? "" : values.front();
}

std::string HttpDate(Clock::WallTime t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(buf, n);
}

constexpr char kAccessKey[] = "AKIDRETRYTEST0000001";
// Distinctive so that a leak into any message is unmistakable.
constexpr char kSecretKey[] = "SeCrEt/ZZTOPSECRETzz+do-not-leak-4711";

class S3ClientRetryTest : public ::testing::Test {
 protected:
  static S3ClientOptions Options(int max_attempts, milliseconds base, milliseconds max,
                                 int budget = 500) {
    S3ClientOptions o;
    o.region = "us-east-1";
    o.retry.max_attempts = max_attempts;
    o.retry.base_delay = base;
    o.retry.max_delay = max;
    o.retry.budget_capacity = budget;
    return o;
  }
  std::unique_ptr<S3Client> Client(S3ClientOptions o, double random = 0.5) {
    return std::make_unique<S3Client>(transport_, creds_, clock_, std::move(o),
                                      [random] { return random; });
  }

  // Whatever else a test checks: every request it caused was signed with
  // our access key and carries the payload hash, each exactly once.
  void TearDown() override {
    for (size_t i = 0; i < transport_.sent.size(); ++i) {
      const HttpRequest& req = transport_.sent[i];
      SCOPED_TRACE("request " + std::to_string(i + 1) + " " + req.method + " " + req.url);
      EXPECT_EQ(HeaderValues(req, "x-amz-content-sha256").size(), 1u);
      EXPECT_EQ(HeaderValues(req, "x-amz-date").size(), 1u);
      const auto auth = HeaderValues(req, "authorization");
      ASSERT_EQ(auth.size(), 1u);
      EXPECT_TRUE(
          auth[0].starts_with(std::string("AWS4-HMAC-SHA256 Credential=") + kAccessKey + "/"))
          << auth[0];
      EXPECT_NE(auth[0].find("x-amz-content-sha256"), std::string::npos) << auth[0];
    }
  }

  ScriptedTransport transport_;
  RecordingClock clock_;
  StaticCredentials creds_{AwsCredentials{kAccessKey, kSecretKey, ""}};
};

TEST_F(S3ClientRetryTest, RetriesSlowDownWithFullJitterBackoff) {
  auto client = Client(Options(8, milliseconds(200), milliseconds(5000)));
  transport_.Reply(503, ErrorXml("SlowDown"));
  transport_.Reply(503, ErrorXml("SlowDown"));
  transport_.Reply(200, "", {{"etag", "\"abc\""}});
  auto r = client->PutObject("bkt", "k", "data");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->etag, "abc");
  EXPECT_EQ(transport_.sent.size(), 3u);
  // Retry n waits random * min(max, base * 2^(n-1)): 0.5 * 200, 0.5 * 400.
  EXPECT_EQ(clock_.sleeps, (std::vector<milliseconds>{milliseconds(100), milliseconds(200)}));
  for (const HttpRequest& req : transport_.sent) EXPECT_EQ(req.body, "data");
}

TEST_F(S3ClientRetryTest, RetriesConnectionResetsWithFullJitterBackoff) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  transport_.ConnectionReset();
  transport_.ConnectionReset();
  transport_.Reply(200, "hello");
  auto r = client->GetObject("bkt", "k");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "hello");
  EXPECT_EQ(transport_.sent.size(), 3u);
  EXPECT_EQ(clock_.sleeps, (std::vector<milliseconds>{milliseconds(50), milliseconds(100)}));
}

TEST_F(S3ClientRetryTest, GivesUpOnPersistentInternalErrorAfterMaxAttempts) {
  auto client = Client(Options(4, milliseconds(100), milliseconds(20'000)));
  transport_.forever = ScriptedTransport::Response(500, ErrorXml("InternalError"));
  auto r = client->GetObject("bkt", "dir/k");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(transport_.sent.size(), 4u);
  EXPECT_EQ(clock_.sleeps,
            (std::vector<milliseconds>{milliseconds(50), milliseconds(100), milliseconds(200)}));
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), "InternalError");
  EXPECT_NE(r.status().message().find("GetObject bkt/dir/k"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("REQ123"), std::string::npos) << r.status().message();
}

TEST_F(S3ClientRetryTest, NeverWaitsLongerThanMaxDelay) {
  // The largest value below 1: every wait sits just under its ceiling.
  const double almost_one = std::nextafter(1.0, 0.0);
  auto client = Client(Options(40, milliseconds(100), milliseconds(1000)), almost_one);
  transport_.forever = ScriptedTransport::Response(503);  // no body: ServiceUnavailable
  auto r = client->HeadObject("bkt", "k");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "ServiceUnavailable");
  EXPECT_EQ(transport_.sent.size(), 40u);
  ASSERT_EQ(clock_.sleeps.size(), 39u);
  for (size_t i = 0; i < clock_.sleeps.size(); ++i) {
    EXPECT_LE(clock_.sleeps[i], milliseconds(1000)) << "retry " << i + 1;
  }
  // The ceiling doubles from 100 ms until the 1 s cap (retry 5), then stays.
  EXPECT_EQ(clock_.sleeps[0], milliseconds(99));
  EXPECT_EQ(clock_.sleeps[3], milliseconds(799));
  EXPECT_EQ(clock_.sleeps[4], milliseconds(999));
  EXPECT_EQ(clock_.sleeps.back(), milliseconds(999));
}

TEST_F(S3ClientRetryTest, RetryBudgetStopsThrottledRetriesEarly) {
  // 25 tokens; a throttled retry costs 10, a transient one 5, a first-try
  // success gives 1 back.
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000), /*budget=*/25));
  transport_.forever = ScriptedTransport::Response(503, ErrorXml("SlowDown"));
  auto r = client->GetObject("bkt", "k");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "SlowDown");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(transport_.sent.size(), 3u) << "25 tokens pay for two throttled retries";
  EXPECT_EQ(clock_.sleeps.size(), 2u);

  // 5 tokens left: exactly one transient retry.
  transport_.forever.reset();
  transport_.sent.clear();
  transport_.ConnectionReset();
  transport_.Reply(200, "ok");
  ASSERT_TRUE(client->GetObject("bkt", "k").ok());
  EXPECT_EQ(transport_.sent.size(), 2u);

  // 0 tokens (a retried success refunds nothing): a reset is not retried.
  transport_.sent.clear();
  transport_.ConnectionReset();
  transport_.Reply(200, "not reached");
  auto empty = client->GetObject("bkt", "k");
  EXPECT_TRUE(empty.status().Is(StatusCode::kUnavailable)) << empty.status().ToString();
  EXPECT_EQ(transport_.sent.size(), 1u);
  transport_.replies.clear();

  // Each first-try success earns back one token: four are not enough for a
  // transient retry, the fifth is.
  for (int i = 0; i < 4; ++i) transport_.Reply(200, "ok");
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(client->GetObject("bkt", "k").ok());
  transport_.sent.clear();
  transport_.ConnectionReset();
  EXPECT_FALSE(client->GetObject("bkt", "k").ok());
  EXPECT_EQ(transport_.sent.size(), 1u) << "4 tokens";

  transport_.Reply(200, "ok");
  ASSERT_TRUE(client->GetObject("bkt", "k").ok());
  transport_.sent.clear();
  transport_.ConnectionReset();
  transport_.Reply(200, "ok");
  EXPECT_TRUE(client->GetObject("bkt", "k").ok());
  EXPECT_EQ(transport_.sent.size(), 2u) << "5 tokens";
}

TEST(RetryBudget, ChargesTenPerThrottleFivePerTransientAndRefundsOnePerSuccess) {
  RetryBudget budget(25);
  EXPECT_EQ(budget.tokens(), 25);
  EXPECT_TRUE(budget.TryAcquire(Outcome::kThrottled));
  EXPECT_EQ(budget.tokens(), 15);
  EXPECT_TRUE(budget.TryAcquire(Outcome::kServerError));
  EXPECT_EQ(budget.tokens(), 10);
  EXPECT_TRUE(budget.TryAcquire(Outcome::kThrottled));
  EXPECT_EQ(budget.tokens(), 0);
  EXPECT_FALSE(budget.TryAcquire(Outcome::kTransient));
  EXPECT_EQ(budget.tokens(), 0) << "a refused retry takes nothing";
  budget.OnSuccess();
  EXPECT_EQ(budget.tokens(), 1);
  for (int i = 0; i < 100; ++i) budget.OnSuccess();
  EXPECT_EQ(budget.tokens(), 25) << "never above the capacity";
}

TEST(RetryBackoff, IsFullJitterOfTheCappedExponentialCeiling) {
  RetryPolicy p;
  p.base_delay = milliseconds(100);
  p.max_delay = milliseconds(1000);
  const UniformRandom quarter = [] { return 0.25; };
  EXPECT_EQ(BackoffDelay(p, 1, quarter), milliseconds(25));
  EXPECT_EQ(BackoffDelay(p, 2, quarter), milliseconds(50));
  EXPECT_EQ(BackoffDelay(p, 4, quarter), milliseconds(200));
  EXPECT_EQ(BackoffDelay(p, 5, quarter), milliseconds(250));  // capped at 1000
  EXPECT_EQ(BackoffDelay(p, 1000, quarter), milliseconds(250));
  EXPECT_EQ(BackoffDelay(p, 3, [] { return 0.0; }), milliseconds(0));
}

TEST_F(S3ClientRetryTest, ResendsAtOnceWithServerTimeAfterRequestTimeTooSkewed) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  const Clock::WallTime start = clock_.Now();
  const Clock::WallTime server = start + minutes(15);
  transport_.Reply(403, ErrorXml("RequestTimeTooSkewed", "<RequestTime>" + AmzDate(start) +
                                                             "</RequestTime><ServerTime>" +
                                                             FormatUtc(server) + "</ServerTime>"));
  transport_.Reply(200, "body");
  auto r = client->GetObject("bkt", "k");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(transport_.sent.size(), 2u);
  EXPECT_TRUE(clock_.sleeps.empty()) << "a skewed clock is corrected, not waited out";
  EXPECT_EQ(HeaderOf(transport_.sent[0], "x-amz-date"), AmzDate(start));
  EXPECT_EQ(HeaderOf(transport_.sent[1], "x-amz-date"), AmzDate(server));
  EXPECT_EQ(client->clock_offset(), seconds(900));

  // Later requests keep signing with the server's time.
  clock_.fake.Advance(std::chrono::hours(1));
  transport_.Reply(200, "again");
  ASSERT_TRUE(client->GetObject("bkt", "k").ok());
  EXPECT_EQ(HeaderOf(transport_.sent.back(), "x-amz-date"), AmzDate(clock_.Now() + minutes(15)));
  EXPECT_NE(HeaderOf(transport_.sent.back(), "authorization")
                .find(std::string(kAccessKey) + "/" + AmzDay(clock_.Now() + minutes(15))),
            std::string::npos);
}

TEST_F(S3ClientRetryTest, LearnsAServerClockBehindOursFromTheDateHeader) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  const Clock::WallTime server = clock_.Now() - minutes(15);
  transport_.Reply(403, ErrorXml("RequestTimeTooSkewed"), {{"date", HttpDate(server)}});
  transport_.Reply(200, "body");
  ASSERT_TRUE(client->GetObject("bkt", "k").ok());
  ASSERT_EQ(transport_.sent.size(), 2u);
  EXPECT_TRUE(clock_.sleeps.empty());
  EXPECT_EQ(client->clock_offset(), seconds(-900));
  EXPECT_EQ(HeaderOf(transport_.sent[1], "x-amz-date"), AmzDate(server));
}

TEST_F(S3ClientRetryTest, AccessDeniedIsPermissionDeniedAfterOneAttempt) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  transport_.forever = ScriptedTransport::Response(403, ErrorXml("AccessDenied"));
  auto r = client->GetObject("bkt", "k");
  EXPECT_EQ(transport_.sent.size(), 1u);
  EXPECT_TRUE(clock_.sleeps.empty());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), "AccessDenied");
}

TEST_F(S3ClientRetryTest, NoSuchKeyIsNotFoundAfterOneAttempt) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  transport_.forever = ScriptedTransport::Response(404, ErrorXml("NoSuchKey"));
  auto r = client->GetObject("bkt", "missing");
  EXPECT_EQ(transport_.sent.size(), 1u);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), "NoSuchKey");
  EXPECT_NE(r.status().message().find("bkt/missing"), std::string::npos);
}

TEST_F(S3ClientRetryTest, HeadOf404WithoutBodyIsNotFoundAfterOneAttempt) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  transport_.forever = ScriptedTransport::Response(404);
  auto r = client->HeadObject("bkt", "missing");
  EXPECT_EQ(transport_.sent.size(), 1u);
  EXPECT_EQ(transport_.sent[0].method, "HEAD");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), "NoSuchKey");
}

TEST_F(S3ClientRetryTest, CreateOnlyPutThatLosesIsPreconditionFailedAfterOneAttempt) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  transport_.forever = ScriptedTransport::Response(412, ErrorXml("PreconditionFailed"));
  auto r = client->PutObject("bkt", "lock", "me", PutCondition::CreateOnly());
  // One PUT, then a HEAD to tell a lost race from our own earlier write.
  ASSERT_EQ(transport_.sent.size(), 2u);
  EXPECT_EQ(transport_.sent[0].method, "PUT");
  EXPECT_EQ(transport_.sent[1].method, "HEAD");
  EXPECT_TRUE(clock_.sleeps.empty());
  EXPECT_EQ(r.status().code(), StatusCode::kPreconditionFailed) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), "PreconditionFailed");
  EXPECT_EQ(HeaderValues(transport_.sent[0], "If-None-Match"), std::vector<std::string>{"*"});
  // The condition is covered by the signature.
  EXPECT_NE(HeaderOf(transport_.sent[0], "authorization").find("if-none-match"), std::string::npos);
}

TEST_F(S3ClientRetryTest, ACreateOnlyPutWhoseAnswerWasLostIsRecognisedAsOurs) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  // The first attempt reached the server, but its answer did not reach us.
  transport_.replies.push_back(Status::Unavailable("connection reset"));
  transport_.Reply(412, ErrorXml("PreconditionFailed"));
  HttpResponse head;
  head.status = 200;
  head.headers = {{"etag", "\"" + HexEncode(Md5("manifest-bytes")) + "\""},
                  {"content-length", "14"}};
  transport_.replies.push_back(head);
  auto r = client->PutObject("bkt", "manifest.json", "manifest-bytes", PutCondition::CreateOnly());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->etag, HexEncode(Md5("manifest-bytes")));
  ASSERT_EQ(transport_.sent.size(), 3u);
  EXPECT_EQ(transport_.sent[2].method, "HEAD");
}

TEST_F(S3ClientRetryTest, ACreateOnlyPutThatMeetsSomeoneElsesObjectStillLoses) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  transport_.Reply(412, ErrorXml("PreconditionFailed"));
  HttpResponse head;
  head.status = 200;
  head.headers = {{"etag", "\"" + HexEncode(Md5("their-bytes")) + "\""}};
  transport_.replies.push_back(head);
  auto r = client->PutObject("bkt", "manifest.json", "our-bytes", PutCondition::CreateOnly());
  EXPECT_TRUE(r.status().Is(StatusCode::kPreconditionFailed)) << r.status().ToString();
}

TEST_F(S3ClientRetryTest, RetriesCompleteMultipartUploadThatFailsInside200) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  transport_.Reply(200, ErrorXml("InternalError"));
  transport_.Reply(200,
                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CompleteMultipartUploadResult>"
                   "<Key>big</Key><ETag>\"etag-3\"</ETag></CompleteMultipartUploadResult>");
  auto r = client->CompleteMultipartUpload("bkt", "big", "UP1", {{1, "e1", 5}, {2, "e2", 5}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->etag, "etag-3");
  ASSERT_EQ(transport_.sent.size(), 2u);
  EXPECT_EQ(clock_.sleeps, std::vector<milliseconds>{milliseconds(50)});
  EXPECT_EQ(transport_.sent[0].method, "POST");
  EXPECT_EQ(transport_.sent[0].url, "https://bkt.s3.us-east-1.amazonaws.com/big?uploadId=UP1");
  EXPECT_EQ(transport_.sent[1].body, transport_.sent[0].body);
}

TEST_F(S3ClientRetryTest, CompleteMultipartUploadFailingInside200GivesUpWithTheCode) {
  auto client = Client(Options(2, milliseconds(100), milliseconds(20'000)));
  transport_.forever = ScriptedTransport::Response(200, ErrorXml("InternalError"));
  auto r = client->CompleteMultipartUpload("bkt", "big", "UP1", {{1, "e1", 5}});
  ASSERT_FALSE(r.ok()) << "a 200 carrying <Error> is not a success";
  EXPECT_EQ(transport_.sent.size(), 2u);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().reason(), "InternalError");
}

TEST_F(S3ClientRetryTest, SignatureMismatchNamesTheCodeButNeverTheSecret) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  transport_.forever = ScriptedTransport::Response(
      403, ErrorXml("SignatureDoesNotMatch",
                    std::string("<AWSAccessKeyId>") + kAccessKey +
                        "</AWSAccessKeyId><StringToSign>AWS4-HMAC-SHA256...</StringToSign>"
                        "<SignatureProvided>abcdef</SignatureProvided>"));
  auto r = client->PutObject("bkt", "k", "data");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(transport_.sent.size(), 1u);
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(r.status().reason(), "SignatureDoesNotMatch");
  const std::string text = r.status().ToString();
  EXPECT_NE(text.find("SignatureDoesNotMatch"), std::string::npos) << text;
  EXPECT_EQ(text.find(kSecretKey), std::string::npos) << text;
  EXPECT_EQ(text.find("ZZTOPSECRET"), std::string::npos) << text;
}

TEST_F(S3ClientRetryTest, SignsEveryAttemptAfreshWithoutDuplicateHeaders) {
  StaticCredentials with_token(AwsCredentials{kAccessKey, kSecretKey, "SESSION-TOKEN-1"});
  // 0.5 * 2 s = 1 s: each retry is signed one second later than the last.
  S3Client client(transport_, with_token, clock_,
                  Options(8, milliseconds(2000), milliseconds(60'000)), [] { return 0.5; });
  transport_.Reply(500, ErrorXml("InternalError"));
  transport_.ConnectionReset();
  transport_.Reply(200, "", {{"etag", "\"e\""}});
  const Clock::WallTime start = clock_.Now();
  ASSERT_TRUE(client.PutObject("bkt", "dir/my key", "payload").ok());
  ASSERT_EQ(transport_.sent.size(), 3u);
  EXPECT_EQ(clock_.sleeps, (std::vector<milliseconds>{milliseconds(1000), milliseconds(2000)}));

  const std::vector<Clock::WallTime> signed_at = {start, start + seconds(1), start + seconds(3)};
  std::set<std::string> signatures;
  for (size_t i = 0; i < transport_.sent.size(); ++i) {
    const HttpRequest& req = transport_.sent[i];
    SCOPED_TRACE("attempt " + std::to_string(i + 1));
    EXPECT_EQ(req.url, "https://bkt.s3.us-east-1.amazonaws.com/dir/my%20key");
    for (const char* name :
         {"host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token", "authorization"}) {
      EXPECT_EQ(HeaderValues(req, name).size(), 1u) << name;
    }
    EXPECT_EQ(req.headers.size(), 5u);
    EXPECT_EQ(HeaderOf(req, "x-amz-content-sha256"), Sha256Hex("payload"));
    EXPECT_EQ(HeaderOf(req, "x-amz-security-token"), "SESSION-TOKEN-1");
    EXPECT_EQ(HeaderOf(req, "x-amz-date"), AmzDate(signed_at[i]));
    const std::string auth = HeaderOf(req, "authorization");
    EXPECT_TRUE(auth.starts_with(std::string("AWS4-HMAC-SHA256 Credential=") + kAccessKey + "/" +
                                 AmzDay(signed_at[i]) + "/us-east-1/s3/aws4_request,"))
        << auth;
    EXPECT_EQ(auth.find(kSecretKey), std::string::npos);

    // The signature is the one for this attempt's time.
    SigningRequest expected;
    expected.method = "PUT";
    expected.path = "/dir/my key";
    expected.headers = {{"host", "bkt.s3.us-east-1.amazonaws.com"}};
    expected.payload_sha256_hex = Sha256Hex("payload");
    SignRequest(expected, with_token.Get().value(), "us-east-1", "s3", signed_at[i]);
    EXPECT_EQ(auth, expected.headers.back().second);
    signatures.insert(auth);
  }
  EXPECT_EQ(signatures.size(), 3u) << "each attempt carries its own signature";
}

TEST_F(S3ClientRetryTest, PartsAreSentWithTheirSha256SignedForTheServerToCheck) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  transport_.Reply(200, "", {{"etag", "\"p1\""}});
  auto r = client->UploadPart("bkt", "big", "UP1", 1, "part bytes", BodyCheck::Signed());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(transport_.sent.size(), 1u);
  EXPECT_EQ(HeaderOf(transport_.sent[0], "x-amz-content-sha256"), Sha256Hex("part bytes"));
  EXPECT_EQ(HeaderOf(transport_.sent[0], "content-md5"), "");
}

TEST_F(S3ClientRetryTest, LargeObjectsAreSentWithTheirSha256SignedForTheServerToCheck) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  transport_.Reply(200, "", {{"etag", "\"o1\""}});
  const std::string body((2 << 20) + 1, 'x');
  auto r = client->PutObject("bkt", "big", body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(transport_.sent.size(), 1u);
  EXPECT_EQ(HeaderOf(transport_.sent[0], "x-amz-content-sha256"), Sha256Hex(body));
  EXPECT_EQ(HeaderOf(transport_.sent[0], "content-md5"), "");
}

TEST_F(S3ClientRetryTest, AnUnsignedPartCarriesNoHashOfItsBody) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  transport_.Reply(200, "", {{"etag", "\"p1\""}});
  auto r = client->UploadPart("bkt", "big", "UP1", 1, "part bytes", BodyCheck::Unsigned());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(transport_.sent.size(), 1u);
  EXPECT_EQ(HeaderOf(transport_.sent[0], "x-amz-content-sha256"), "UNSIGNED-PAYLOAD");
  EXPECT_EQ(HeaderOf(transport_.sent[0], "content-md5"), "");
}

TEST_F(S3ClientRetryTest, ASmallBodyIsSignedWhateverTheCallerAsks) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  transport_.Reply(200, "", {{"etag", "\"o1\""}});
  transport_.Reply(200, "", {{"etag", "\"o2\""}});
  const std::string big((1 << 20) + 1, 'b');
  ASSERT_TRUE(client->PutObject("bkt", "small", "tiny", {}, BodyCheck::Unsigned()).ok());
  ASSERT_TRUE(client->PutObject("bkt", "big", big, {}, BodyCheck::Unsigned()).ok());
  ASSERT_EQ(transport_.sent.size(), 2u);
  EXPECT_EQ(HeaderOf(transport_.sent[0], "x-amz-content-sha256"), Sha256Hex("tiny"));
  EXPECT_EQ(HeaderOf(transport_.sent[1], "x-amz-content-sha256"), "UNSIGNED-PAYLOAD");
}

TEST(TransportKeepsBodiesIntact, HttpsAndLoopbackDoPlainHttpToAnotherHostDoesNot) {
  EXPECT_TRUE(TransportKeepsBodiesIntact(""));  // AWS
  EXPECT_TRUE(TransportKeepsBodiesIntact("https://minio.internal:9000"));
  EXPECT_TRUE(TransportKeepsBodiesIntact("HTTPS://s3.example.com"));
  EXPECT_TRUE(TransportKeepsBodiesIntact("http://127.0.0.1:17480"));
  EXPECT_TRUE(TransportKeepsBodiesIntact("http://127.8.9.10/"));
  EXPECT_TRUE(TransportKeepsBodiesIntact("http://localhost:9000"));
  EXPECT_TRUE(TransportKeepsBodiesIntact("http://[::1]:9000"));
  EXPECT_FALSE(TransportKeepsBodiesIntact("http://10.0.0.5:9000"));
  EXPECT_FALSE(TransportKeepsBodiesIntact("http://127.example.com:9000"));
  EXPECT_FALSE(TransportKeepsBodiesIntact("http://localhost.example.com"));
  EXPECT_FALSE(TransportKeepsBodiesIntact("http://[::2]:9000"));
  EXPECT_FALSE(TransportKeepsBodiesIntact("http://[::1"));  // no closing bracket
  EXPECT_FALSE(TransportKeepsBodiesIntact("ftp://127.0.0.1"));
}

TEST_F(S3ClientRetryTest, PartsWithContentMd5AreSentWithUnsignedPayload) {
  auto client = Client(Options(8, milliseconds(100), milliseconds(20'000)));
  transport_.Reply(200, "", {{"etag", "\"p1\""}});
  auto r = client->UploadPart("bkt", "big", "UP1", 1, "part bytes",
                             BodyCheck::ContentMd5("bWQ1"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "p1");
  ASSERT_EQ(transport_.sent.size(), 1u);
  EXPECT_EQ(HeaderOf(transport_.sent[0], "x-amz-content-sha256"), "UNSIGNED-PAYLOAD");
  EXPECT_EQ(HeaderOf(transport_.sent[0], "content-md5"), "bWQ1");
  EXPECT_NE(HeaderOf(transport_.sent[0], "authorization")
                .find(std::string("Credential=") + kAccessKey + "/"),
            std::string::npos);
}

}  // namespace
}  // namespace sg
