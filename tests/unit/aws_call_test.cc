// SignedCallExecutor against a scripted transport and a recording fake clock:
// what is retried and how long it waits, what is not retried, clock-skew
// correction, the retry budget, credentials taken afresh for every attempt;
// and that the S3 and Auto Scaling clients retry alike because they share it.
#include "common/aws_call.h"

#include <gtest/gtest.h>

#include "common/autoscaling_client.h"
#include "common/crypto.h"
#include "common/s3_client.h"
#include "common/sigv4.h"
#include "tests/support/fake_clock.h"
#include "tests/support/scripted_transport.h"

namespace sg {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::RecordingClock;
using testing::ScriptedTransport;
using testing::SentHeader;

// Every Get hands out a new access key, as a provider renewing credentials would.
class CountingCredentials final : public CredentialsProvider {
 public:
  StatusOr<AwsCredentials> Get() override {
    ++calls;
    if (fail) return Status::NotFound("no AWS credentials (test)");
    return AwsCredentials{"AKID" + std::to_string(calls), "secret", ""};
  }
  int calls = 0;
  bool fail = false;
};

// A service with one code per outcome, read from the X-Code header.
AnswerRules TestRules() {
  static const ErrorOutcomes kOutcomes = {.clock_skew = {"Skewed"},
                                          .throttled = {"SlowDown"},
                                          .server_error = {"Busy"},
                                          .server_failed = [](long s) { return s >= 500; }};
  auto error_of = [](const HttpResponse& r) {
    AwsErrorInfo e;
    e.code = r.Header("x-code");
    CompleteErrorInfo(e, r, {{503, "ServiceUnavailable"}}, "x-request-id");
    return e;
  };
  AnswerRules rules;
  rules.classify = [error_of](const StatusOr<HttpResponse>& r) {
    return ClassifyAwsAnswer(r, error_of, kOutcomes);
  };
  rules.error = [error_of](const HttpResponse& r) {
    return AwsErrorStatus(AwsErrorCode(error_of(r), {}), "Test Op", error_of(r));
  };
  return rules;
}

SignedRequest Request(std::string body = "payload") {
  SignedRequest r;
  r.method = "PUT";
  r.url = "https://svc.example.com/thing";
  r.host = "svc.example.com";
  r.path = "/thing";
  r.body = std::move(body);
  r.what = "Test Op";
  return r;
}

class SignedCallExecutorTest : public ::testing::Test {
 protected:
  SignedCallExecutor Executor(int max_attempts = 5, int budget = 500) {
    SignedCallExecutor::Options o;
    o.service = "svc";
    o.region = "eu-west-1";
    o.display_name = "Test";
    o.retry.max_attempts = max_attempts;
    o.retry.base_delay = milliseconds(100);
    o.retry.max_delay = milliseconds(10'000);
    o.retry.budget_capacity = budget;
    return SignedCallExecutor(transport_, creds_, clock_, o, [] { return 0.5; });
  }

  ScriptedTransport transport_;
  CountingCredentials creds_;
  RecordingClock clock_;
};

TEST_F(SignedCallExecutorTest, Retries503ThenSucceedsSigningEachAttemptAfresh) {
  auto executor = Executor();
  transport_.Reply(503);
  transport_.Reply(503, "", {{"x-code", "Busy"}});
  transport_.Reply(200, "done");
  auto r = executor.Execute(Request(), TestRules());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "done");
  ASSERT_EQ(transport_.sent.size(), 3u);
  EXPECT_EQ(clock_.sleeps, (std::vector<milliseconds>{milliseconds(50), milliseconds(100)}));
  EXPECT_EQ(creds_.calls, 3) << "credentials are asked for on every attempt";
  for (size_t i = 0; i < transport_.sent.size(); ++i) {
    const HttpRequest& sent = transport_.sent[i];
    EXPECT_EQ(sent.body, "payload");
    EXPECT_EQ(sent.url, "https://svc.example.com/thing");
    EXPECT_EQ(SentHeader(sent, "host"), "svc.example.com");
    EXPECT_EQ(SentHeader(sent, "x-amz-content-sha256"), Sha256Hex("payload"));
    EXPECT_NE(
        SentHeader(sent, "authorization").find("Credential=AKID" + std::to_string(i + 1) + "/"),
        std::string::npos)
        << "attempt " << i + 1 << " is signed with the credentials current then";
    EXPECT_NE(SentHeader(sent, "authorization").find("/eu-west-1/svc/aws4_request"),
              std::string::npos);
  }
}

TEST_F(SignedCallExecutorTest, A403IsNotRetried) {
  auto executor = Executor();
  transport_.forever =
      ScriptedTransport::Response(403, "", {{"x-code", "AccessDenied"}, {"x-request-id", "R9"}});
  auto r = executor.Execute(Request(), TestRules());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(transport_.sent.size(), 1u);
  EXPECT_TRUE(clock_.sleeps.empty());
  EXPECT_TRUE(r.status().Is(StatusCode::kPermissionDenied)) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), "AccessDenied");
  EXPECT_EQ(r.status().message(), "Test Op: AccessDenied (HTTP 403, request id R9)");
}

TEST_F(SignedCallExecutorTest, ATlsFailureFailsAtOnceNamingTheCall) {
  auto executor = Executor();
  transport_.forever = StatusOr<HttpResponse>(Status::PermissionDenied("certificate rejected"));
  auto r = executor.Execute(Request(), TestRules());
  EXPECT_EQ(transport_.sent.size(), 1u);
  EXPECT_TRUE(r.status().Is(StatusCode::kPermissionDenied)) << r.status().ToString();
  EXPECT_NE(r.status().ToString().find("Test Op"), std::string::npos) << r.status().ToString();
}

TEST_F(SignedCallExecutorTest, NoCredentialsSendsNothing) {
  auto executor = Executor();
  creds_.fail = true;
  auto r = executor.Execute(Request(), TestRules());
  EXPECT_TRUE(r.status().Is(StatusCode::kNotFound)) << r.status().ToString();
  EXPECT_TRUE(transport_.sent.empty());
}

TEST_F(SignedCallExecutorTest, CorrectsASkewedClockAtOnceAndKeepsTheOffset) {
  auto executor = Executor();
  const Clock::WallTime server = clock_.Now() + minutes(20);
  transport_.Reply(403, "<Error><ServerTime>" + FormatUtc(server) + "</ServerTime></Error>",
                   {{"x-code", "Skewed"}});
  transport_.Reply(200);
  transport_.Reply(200);
  ASSERT_TRUE(executor.Execute(Request(), TestRules()).ok());
  ASSERT_EQ(transport_.sent.size(), 2u);
  EXPECT_TRUE(clock_.sleeps.empty()) << "a skewed clock is corrected, not waited out";
  EXPECT_EQ(executor.clock_offset(), seconds(1200));
  EXPECT_EQ(SentHeader(transport_.sent[1], "x-amz-date"), AmzDate(server));
  // The next call signs with the server's time from the start.
  ASSERT_TRUE(executor.Execute(Request(), TestRules()).ok());
  EXPECT_EQ(SentHeader(transport_.sent[2], "x-amz-date"), AmzDate(clock_.Now() + minutes(20)));
}

TEST_F(SignedCallExecutorTest, ASkewAnswerWithoutTheServerTimeIsAFailure) {
  auto executor = Executor();
  transport_.forever = ScriptedTransport::Response(403, "", {{"x-code", "Skewed"}});
  auto r = executor.Execute(Request(), TestRules());
  EXPECT_EQ(transport_.sent.size(), 1u);
  EXPECT_EQ(r.status().reason(), "Skewed");
  EXPECT_EQ(executor.clock_offset(), seconds(0));
}

TEST_F(SignedCallExecutorTest, StopsWhenTheBudgetIsExhausted) {
  // 15 tokens: one throttled retry (10), then one transient retry (5), then none.
  auto executor = Executor(/*max_attempts=*/8, /*budget=*/15);
  transport_.forever = ScriptedTransport::Response(400, "", {{"x-code", "SlowDown"}});
  auto r = executor.Execute(Request(), TestRules());
  EXPECT_EQ(r.status().reason(), "SlowDown");
  EXPECT_EQ(transport_.sent.size(), 2u) << "15 tokens pay for one throttled retry";

  transport_.forever.reset();
  transport_.sent.clear();
  transport_.ConnectionReset();
  transport_.ConnectionReset();
  transport_.Reply(200);
  r = executor.Execute(Request(), TestRules());
  EXPECT_TRUE(r.status().Is(StatusCode::kUnavailable)) << r.status().ToString();
  EXPECT_EQ(transport_.sent.size(), 2u) << "5 tokens pay for one transient retry";
}

TEST_F(SignedCallExecutorTest, GivesUpAfterMaxAttempts) {
  auto executor = Executor(/*max_attempts=*/3);
  transport_.forever = ScriptedTransport::Response(500);
  auto r = executor.Execute(Request(), TestRules());
  EXPECT_EQ(transport_.sent.size(), 3u);
  EXPECT_EQ(clock_.sleeps, (std::vector<milliseconds>{milliseconds(50), milliseconds(100)}));
  EXPECT_TRUE(r.status().Is(StatusCode::kUnavailable)) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), "HTTP500");
}

// An endpoint that accepts and never answers: each attempt takes its whole
// answer timeout on the fake clock and fails without an answer; "answer"
// entries reply 503 or 200 at once.
class SilentTransport final : public HttpTransport {
 public:
  explicit SilentTransport(RecordingClock& clock) : clock_(clock) {}
  StatusOr<HttpResponse> Send(const HttpRequest& request) override {
    answer_timeouts.push_back(request.answer_timeout);
    const long status = script.empty() ? 0 : script.front();
    if (!script.empty()) script.erase(script.begin());
    if (status != 0) return ScriptedTransport::Response(status);
    clock_.fake.Advance(request.answer_timeout);
    return Status::Unavailable("GET https://svc.example.com/thing: no answer")
        .WithReason(kNoAnswerReason);
  }
  std::vector<long> script;  // 0: silence; anything else: that status at once
  std::vector<milliseconds> answer_timeouts;

 private:
  RecordingClock& clock_;
};

TEST_F(SignedCallExecutorTest, ASilentEndpointFailsWithinTheBoundNamingTheEndpoint) {
  SilentTransport silent(clock_);
  SignedCallExecutor::Options o{
      .service = "svc", .region = "eu-west-1", .display_name = "Test", .retry = {}};
  SignedCallExecutor executor(silent, creds_, clock_, o, [] { return 0.5; });
  SignedRequest request = Request();
  request.answer_timeout = seconds(10);
  request.give_up_after = seconds(15);
  const auto start = clock_.Monotonic();
  auto r = executor.Execute(std::move(request), TestRules());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), kNoAnswerReason);
  EXPECT_TRUE(r.status().Is(StatusCode::kUnavailable));
  EXPECT_NE(r.status().message().find(
                "Test Op: no answer from https://svc.example.com within 15 s (2 attempts; "),
            std::string::npos)
      << r.status().message();
  // The second attempt only gets what is left of the 15 s after 10 s and a
  // 50 ms backoff.
  EXPECT_EQ(silent.answer_timeouts, (std::vector<milliseconds>{seconds(10), milliseconds(4950)}));
  EXPECT_EQ(clock_.Monotonic() - start, seconds(15));
}

TEST_F(SignedCallExecutorTest, AnAnswerStartsTheSilenceBoundAfresh) {
  SilentTransport silent(clock_);
  SignedCallExecutor::Options o{
      .service = "svc", .region = "eu-west-1", .display_name = "Test", .retry = {}};
  SignedCallExecutor executor(silent, creds_, clock_, o, [] { return 0.5; });
  silent.script = {0, 503, 0, 200};
  SignedRequest request = Request();
  request.answer_timeout = seconds(10);
  request.give_up_after = seconds(12);
  auto r = executor.Execute(std::move(request), TestRules());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Counted from the 503, the third attempt has the whole 10 s again.
  EXPECT_EQ(silent.answer_timeouts, (std::vector<milliseconds>{seconds(10), milliseconds(1950),
                                                               seconds(10), milliseconds(1700)}));
}

TEST_F(SignedCallExecutorTest, WithoutABoundTheRetryPolicyAloneEndsASilentCall) {
  SilentTransport silent(clock_);
  SignedCallExecutor::Options o{
      .service = "svc", .region = "eu-west-1", .display_name = "Test", .retry = {}};
  o.retry.max_attempts = 3;
  SignedCallExecutor executor(silent, creds_, clock_, o, [] { return 0.5; });
  auto r = executor.Execute(Request(), TestRules());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(silent.answer_timeouts, std::vector<milliseconds>(3, milliseconds(0)));
  EXPECT_EQ(r.status().message().find("within"), std::string::npos) << r.status().message();
}

TEST(EndpointOf, IsSchemeHostAndPort) {
  EXPECT_EQ(EndpointOf("http://127.0.0.1:9000/bkt/key?list-type=2"), "http://127.0.0.1:9000");
  EXPECT_EQ(EndpointOf("https://s3.eu-west-1.amazonaws.com"), "https://s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(EndpointOf("https://h?x=1"), "https://h");
}

TEST_F(SignedCallExecutorTest, UnsignedPayloadIsNotHashed) {
  auto executor = Executor();
  transport_.Reply(200);
  SignedRequest request = Request("big part");
  request.sign_payload = false;
  ASSERT_TRUE(executor.Execute(std::move(request), TestRules()).ok());
  EXPECT_EQ(SentHeader(transport_.sent[0], "x-amz-content-sha256"), "UNSIGNED-PAYLOAD");
  EXPECT_EQ(transport_.sent[0].body, "big part");
}

// Both clients hand their calls to the executor: a call throttled to the end
// is tried as often, with the same waits, whichever client makes it.
TEST(SharedExecutor, S3AndAutoScalingRetryAThrottledCallAlike) {
  RetryPolicy policy;
  policy.max_attempts = 5;
  policy.base_delay = milliseconds(200);
  policy.max_delay = milliseconds(20'000);
  StaticCredentials creds(AwsCredentials{"AKIDSHARED", "secret", ""});

  ScriptedTransport s3_transport;
  RecordingClock s3_clock;
  S3ClientOptions s3_options;
  s3_options.retry = policy;
  S3Client s3(s3_transport, creds, s3_clock, s3_options, [] { return 0.5; });
  s3_transport.forever = ScriptedTransport::Response(
      503, "<Error><Code>SlowDown</Code><Message>Reduce your request rate</Message></Error>");
  auto s3_result = s3.GetObject("bkt", "k");

  ScriptedTransport asg_transport;
  RecordingClock asg_clock;
  AutoScalingClientOptions asg_options;
  asg_options.retry = policy;
  AutoScalingClient asg(asg_transport, creds, asg_clock, asg_options, [] { return 0.5; });
  asg_transport.forever = ScriptedTransport::Response(
      400,
      "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded"
      "</Message></Error><RequestId>r</RequestId></ErrorResponse>");
  Status asg_result = asg.UpdateAutoScalingGroup("g", {.min_size = 0});

  EXPECT_EQ(s3_transport.sent.size(), 5u);
  EXPECT_EQ(asg_transport.sent.size(), s3_transport.sent.size());
  EXPECT_EQ(s3_clock.sleeps, (std::vector<milliseconds>{milliseconds(100), milliseconds(200),
                                                        milliseconds(400), milliseconds(800)}));
  EXPECT_EQ(asg_clock.sleeps, s3_clock.sleeps);
  EXPECT_TRUE(s3_result.status().Is(StatusCode::kUnavailable)) << s3_result.status().ToString();
  EXPECT_TRUE(asg_result.Is(StatusCode::kUnavailable)) << asg_result.ToString();
  EXPECT_EQ(s3_result.status().reason(), "SlowDown");
  EXPECT_EQ(asg_result.reason(), "Throttling");
}

TEST(AwsErrors, SharedCodesMapAlikeForEveryService) {
  for (const char* code : {"AccessDenied", "ExpiredToken", "SignatureDoesNotMatch"}) {
    EXPECT_EQ(AwsErrorCode({403, code, "", ""}, {}), StatusCode::kPermissionDenied) << code;
  }
  for (const char* code : {"Throttling", "SlowDown", "InternalError", "RequestExpired"}) {
    EXPECT_EQ(AwsErrorCode({400, code, "", ""}, {}), StatusCode::kUnavailable) << code;
  }
  // A service's own table comes first.
  EXPECT_EQ(
      AwsErrorCode({400, "AccessDenied", "", ""}, {{StatusCode::kNotFound, {"AccessDenied"}}}),
      StatusCode::kNotFound);
  EXPECT_EQ(AwsErrorCode({400, "Odd", "", ""}, {}), StatusCode::kIOError);
  EXPECT_EQ(AwsErrorCode({502, "Odd", "", ""}, {}), StatusCode::kUnavailable);
}

TEST(AwsErrors, ParsesBothErrorDocumentShapes) {
  auto s3 =
      ParseAwsErrorXml("<Error><Code>NoSuchKey</Code><RequestId>R1</RequestId></Error>", "Error");
  ASSERT_TRUE(s3.has_value());
  EXPECT_EQ(s3->code, "NoSuchKey");
  EXPECT_EQ(s3->request_id, "R1");
  std::string type;
  auto query = ParseAwsErrorXml(
      "<ErrorResponse><Error><Type>Sender</Type><Code>ValidationError</Code></Error>"
      "<RequestId>R2</RequestId></ErrorResponse>",
      "ErrorResponse", &type);
  ASSERT_TRUE(query.has_value());
  EXPECT_EQ(type, "Sender");
  EXPECT_EQ(query->request_id, "R2");
  EXPECT_FALSE(ParseAwsErrorXml("<Error><Code>X</Code></Error>", "ErrorResponse").has_value());
}

}  // namespace
}  // namespace sg
