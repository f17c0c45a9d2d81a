// AutoScalingClient against a scripted transport: the exact form bodies of the
// three actions, the SigV4 signature (service "autoscaling", the region, the
// canonical request written out by hand), XML answers and <ErrorResponse>
// errors, retries, and where requests go.
#include "common/autoscaling_client.h"

#include <gtest/gtest.h>

#include <deque>

#include "common/crypto.h"
#include "common/sigv4.h"
#include "common/strings.h"
#include "tests/support/fake_clock.h"
#include "tests/support/scripted_transport.h"

namespace sg {
namespace {

using testing::ScriptedTransport;

std::string HeaderOf(const HttpRequest& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (ToLower(k) == ToLower(name)) return v;
  }
  return "";
}

std::string ErrorXml(const std::string& code, const std::string& message) {
  return "<ErrorResponse xmlns=\"http://autoscaling.amazonaws.com/doc/2011-01-01/\"><Error>"
         "<Type>Sender</Type><Code>" +
         code + "</Code><Message>" + message +
         "</Message></Error><RequestId>req-1</RequestId></ErrorResponse>";
}

std::string OkXml(const std::string& action, const std::string& inner = "") {
  return "<" + action + "Response xmlns=\"http://autoscaling.amazonaws.com/doc/2011-01-01/\">" +
         inner + "<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></" + action +
         "Response>";
}

constexpr char kAccessKey[] = "AKIDEXAMPLE";
constexpr char kSecret[] = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

class AutoScalingClientTest : public ::testing::Test {
 protected:
  AutoScalingClientTest() {
    // 2026-03-01T12:34:56Z
    clock_.SetNow(Clock::WallTime(std::chrono::seconds(1772368496)));
  }
  AutoScalingClient Client(std::string region = "eu-west-1", std::string endpoint = "",
                           int max_attempts = 4) {
    AutoScalingClientOptions o;
    o.region = std::move(region);
    o.endpoint = std::move(endpoint);
    o.retry.max_attempts = max_attempts;
    return AutoScalingClient(transport_, creds_, clock_, o, [] { return 0.5; });
  }

  ScriptedTransport transport_;
  StaticCredentials creds_{AwsCredentials{kAccessKey, kSecret, ""}};
  testing::FakeClock clock_;
};

TEST(AutoScalingBody, IsFormEncodedWithActionAndVersionFirst) {
  EXPECT_EQ(BuildAutoScalingBody("UpdateAutoScalingGroup",
                                 {{"AutoScalingGroupName", "my asg/1"}, {"MinSize", "0"}}),
            "Action=UpdateAutoScalingGroup&Version=2011-01-01&AutoScalingGroupName=my%20asg%2F1"
            "&MinSize=0");
}

TEST_F(AutoScalingClientTest, DescribeSendsTheInstanceIdAndReadsTheGroup) {
  transport_.Reply(200, OkXml("DescribeAutoScalingInstances",
                              "<DescribeAutoScalingInstancesResult><AutoScalingInstances><member>"
                              "<InstanceId>i-0abc</InstanceId>"
                              "<AutoScalingGroupName>train-asg</AutoScalingGroupName>"
                              "<AvailabilityZone>eu-west-1a</AvailabilityZone>"
                              "<LifecycleState>InService</LifecycleState>"
                              "<HealthStatus>HEALTHY</HealthStatus>"
                              "</member></AutoScalingInstances>"
                              "</DescribeAutoScalingInstancesResult>"));
  AutoScalingClient client = Client();
  auto i = client.DescribeAutoScalingInstance("i-0abc");
  ASSERT_TRUE(i.ok()) << i.status().ToString();
  EXPECT_EQ(i->group_name, "train-asg");
  EXPECT_EQ(i->lifecycle_state, "InService");
  EXPECT_EQ(i->availability_zone, "eu-west-1a");
  ASSERT_EQ(transport_.sent.size(), 1u);
  const HttpRequest& r = transport_.sent[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.url, "https://autoscaling.eu-west-1.amazonaws.com/");
  EXPECT_EQ(r.body,
            "Action=DescribeAutoScalingInstances&Version=2011-01-01&InstanceIds.member.1=i-0abc");
  EXPECT_EQ(HeaderOf(r, "content-type"), "application/x-www-form-urlencoded; charset=utf-8");
}

TEST_F(AutoScalingClientTest, AnInstanceInNoGroupIsNotFound) {
  transport_.Reply(200, OkXml("DescribeAutoScalingInstances",
                              "<DescribeAutoScalingInstancesResult><AutoScalingInstances/>"
                              "</DescribeAutoScalingInstancesResult>"));
  AutoScalingClient client = Client();
  auto i = client.DescribeAutoScalingInstance("i-0abc");
  ASSERT_FALSE(i.ok());
  EXPECT_TRUE(i.status().Is(StatusCode::kNotFound));
  EXPECT_EQ(i.status().reason(), "NotInAutoScalingGroup");
}

TEST_F(AutoScalingClientTest, UpdateSendsOnlyTheSizesGiven) {
  transport_.Reply(200, OkXml("UpdateAutoScalingGroup"));
  AutoScalingClient client = Client();
  ASSERT_TRUE(
      client.UpdateAutoScalingGroup("train-asg", {.min_size = 0, .desired_capacity = 0}).ok());
  ASSERT_EQ(transport_.sent.size(), 1u);
  EXPECT_EQ(transport_.sent[0].body,
            "Action=UpdateAutoScalingGroup&Version=2011-01-01&AutoScalingGroupName=train-asg"
            "&MinSize=0&DesiredCapacity=0");
}

TEST_F(AutoScalingClientTest, CompleteLifecycleActionNamesGroupHookResultAndInstance) {
  transport_.Reply(200, OkXml("CompleteLifecycleAction", "<CompleteLifecycleActionResult/>"));
  transport_.Reply(200, OkXml("CompleteLifecycleAction", "<CompleteLifecycleActionResult/>"));
  AutoScalingClient client = Client();
  ASSERT_TRUE(client.CompleteLifecycleAction("train-asg", "drain", "i-0abc").ok());
  ASSERT_TRUE(
      client
          .CompleteLifecycleAction("train-asg", "drain", "i-0abc", LifecycleActionResult::kAbandon)
          .ok());
  EXPECT_EQ(transport_.sent[0].body,
            "Action=CompleteLifecycleAction&Version=2011-01-01&AutoScalingGroupName=train-asg"
            "&LifecycleHookName=drain&LifecycleActionResult=CONTINUE&InstanceId=i-0abc");
  EXPECT_NE(transport_.sent[1].body.find("LifecycleActionResult=ABANDON"), std::string::npos);
}

TEST_F(AutoScalingClientTest, SignatureCoversTheCanonicalRequestForServiceAutoscaling) {
  transport_.Reply(200, OkXml("UpdateAutoScalingGroup"));
  AutoScalingClient client = Client("eu-west-1");
  ASSERT_TRUE(client.UpdateAutoScalingGroup("a", {.desired_capacity = 0}).ok());
  const HttpRequest& r = transport_.sent[0];
  const std::string body =
      "Action=UpdateAutoScalingGroup&Version=2011-01-01"
      "&AutoScalingGroupName=a&DesiredCapacity=0";
  ASSERT_EQ(r.body, body);
  EXPECT_EQ(HeaderOf(r, "x-amz-date"), "20260301T123456Z");
  // The canonical request, written out as SigV4 defines it for this call.
  const std::string canonical =
      "POST\n/\n\n"
      "content-type:application/x-www-form-urlencoded; charset=utf-8\n"
      "host:autoscaling.eu-west-1.amazonaws.com\n"
      "x-amz-content-sha256:" +
      Sha256Hex(body) +
      "\n"
      "x-amz-date:20260301T123456Z\n\n"
      "content-type;host;x-amz-content-sha256;x-amz-date\n" +
      Sha256Hex(body);
  const std::string scope = "20260301/eu-west-1/autoscaling/aws4_request";
  const std::string signature =
      SignatureHex(SigningKey(kSecret, "20260301", "eu-west-1", "autoscaling"),
                   "AWS4-HMAC-SHA256\n20260301T123456Z\n" + scope + "\n" + Sha256Hex(canonical));
  EXPECT_EQ(HeaderOf(r, "authorization"),
            std::string("AWS4-HMAC-SHA256 Credential=") + kAccessKey + "/" + scope +
                ", SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date, Signature=" +
                signature);
  EXPECT_EQ(r.body.find(kSecret), std::string::npos);
}

TEST_F(AutoScalingClientTest, ErrorResponsesBecomeStatusesWithTheServiceCode) {
  transport_.Reply(400, ErrorXml("ValidationError", "AutoScalingGroup name not found - nope"));
  transport_.Reply(400, ErrorXml("ValidationError", "Desired capacity:5 must be between ..."));
  transport_.Reply(403, ErrorXml("AccessDenied", "User is not authorized"));
  AutoScalingClient client = Client();
  Status missing = client.UpdateAutoScalingGroup("nope", {.min_size = 0});
  EXPECT_TRUE(missing.Is(StatusCode::kNotFound)) << missing.ToString();
  EXPECT_EQ(missing.reason(), "ValidationError");
  EXPECT_NE(missing.message().find("UpdateAutoScalingGroup"), std::string::npos);
  EXPECT_NE(missing.message().find("req-1"), std::string::npos);
  Status invalid = client.UpdateAutoScalingGroup("a", {.desired_capacity = 5});
  EXPECT_TRUE(invalid.Is(StatusCode::kInvalidArgument)) << invalid.ToString();
  Status denied = client.CompleteLifecycleAction("a", "h", "i-1");
  EXPECT_TRUE(denied.Is(StatusCode::kPermissionDenied)) << denied.ToString();
  EXPECT_EQ(denied.reason(), "AccessDenied");
  EXPECT_EQ(transport_.sent.size(), 3u);  // none of these is retried
}

TEST_F(AutoScalingClientTest, ThrottlingAndServerErrorsAreRetriedThenSucceed) {
  transport_.Reply(400, ErrorXml("Throttling", "Rate exceeded"));
  transport_.Reply(500, ErrorXml("ResourceContention", "pending update"));
  transport_.replies.push_back(Status::Unavailable("connection reset"));
  transport_.Reply(200, OkXml("UpdateAutoScalingGroup"));
  AutoScalingClient client = Client();
  const auto before = clock_.Monotonic();
  Status st = client.UpdateAutoScalingGroup("a", {.min_size = 0, .desired_capacity = 0});
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(transport_.sent.size(), 4u);
  EXPECT_GT(clock_.Monotonic(), before);  // it backed off between attempts
  // Each attempt is signed afresh with the same body.
  for (const HttpRequest& r : transport_.sent) EXPECT_EQ(r.body, transport_.sent[0].body);
}

TEST_F(AutoScalingClientTest, RetriesStopAtMaxAttempts) {
  for (int i = 0; i < 5; ++i) transport_.Reply(503, "");
  AutoScalingClient client = Client("eu-west-1", "", 3);
  Status st = client.UpdateAutoScalingGroup("a", {.min_size = 0});
  EXPECT_TRUE(st.Is(StatusCode::kUnavailable)) << st.ToString();
  EXPECT_EQ(st.reason(), "ServiceUnavailable");
  EXPECT_EQ(transport_.sent.size(), 3u);
}

TEST_F(AutoScalingClientTest, RequestExpiredResignsWithTheServiceClock) {
  transport_.Reply(400, ErrorXml("RequestExpired", "Request has expired"),
                   {{"date", "Sun, 01 Mar 2026 13:04:56 GMT"}});  // 30 minutes ahead
  transport_.Reply(200, OkXml("UpdateAutoScalingGroup"));
  AutoScalingClient client = Client();
  ASSERT_TRUE(client.UpdateAutoScalingGroup("a", {.min_size = 0}).ok());
  ASSERT_EQ(transport_.sent.size(), 2u);
  EXPECT_EQ(HeaderOf(transport_.sent[0], "x-amz-date"), "20260301T123456Z");
  EXPECT_EQ(HeaderOf(transport_.sent[1], "x-amz-date"), "20260301T130456Z");
}

TEST_F(AutoScalingClientTest, GarbageAnswersAreCorruption) {
  transport_.Reply(200, "not xml at all <<<");
  AutoScalingClient client = Client();
  auto i = client.DescribeAutoScalingInstance("i-1");
  EXPECT_TRUE(i.status().Is(StatusCode::kCorruption)) << i.status().ToString();
}

TEST_F(AutoScalingClientTest, CustomEndpointKeepsItsSchemeHostAndPath) {
  transport_.Reply(200, OkXml("UpdateAutoScalingGroup"));
  AutoScalingClient client = Client("us-west-2", "http://127.0.0.1:9999/asg/");
  ASSERT_TRUE(client.UpdateAutoScalingGroup("a", {.min_size = 0}).ok());
  EXPECT_EQ(transport_.sent[0].url, "http://127.0.0.1:9999/asg");
  EXPECT_NE(HeaderOf(transport_.sent[0], "authorization").find("/us-west-2/autoscaling/"),
            std::string::npos);
}

TEST_F(AutoScalingClientTest, AnEndpointThatIsNotAUrlIsRefusedWithoutSending) {
  AutoScalingClient client = Client("us-east-1", "autoscaling.example.com");
  Status st = client.UpdateAutoScalingGroup("a", {.min_size = 0});
  EXPECT_TRUE(st.Is(StatusCode::kInvalidArgument)) << st.ToString();
  EXPECT_TRUE(transport_.sent.empty());
}

TEST(AutoScalingEndpoint, ResolvesLikeTheAwsTools) {
  const std::map<std::string, std::string> both = {
      {"AWS_ENDPOINT_URL_AUTOSCALING", "http://asg.local:1/"},
      {"AWS_ENDPOINT_URL", "http://all.local:2"}};
  EXPECT_EQ(ResolveAutoScalingEndpoint("https://configured", "us-east-1", both),
            "https://configured");
  EXPECT_EQ(ResolveAutoScalingEndpoint(std::nullopt, "us-east-1", both), "http://asg.local:1");
  EXPECT_EQ(ResolveAutoScalingEndpoint(std::nullopt, "us-east-1",
                                       {{"AWS_ENDPOINT_URL", "http://all.local:2"}}),
            "http://all.local:2");
  EXPECT_EQ(ResolveAutoScalingEndpoint(std::nullopt, "ap-south-1", {}),
            "https://autoscaling.ap-south-1.amazonaws.com");
  EXPECT_EQ(ResolveAutoScalingEndpoint(std::nullopt, "cn-north-1", {}),
            "https://autoscaling.cn-north-1.amazonaws.com.cn");
  // An empty configured value does not hide the environment.
  EXPECT_EQ(ResolveAutoScalingEndpoint(std::string(), "us-east-1", both), "http://asg.local:1");
}

TEST(AutoScalingErrors, ParseAndClassify) {
  auto e = ParseAutoScalingErrorXml(ErrorXml("Throttling", "Rate exceeded"));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->type, "Sender");
  EXPECT_EQ(e->code, "Throttling");
  EXPECT_EQ(e->request_id, "req-1");
  EXPECT_FALSE(ParseAutoScalingErrorXml("<Error><Code>NoSuchKey</Code></Error>").has_value());
  HttpResponse throttled;
  throttled.status = 400;
  throttled.body = ErrorXml("Throttling", "x");
  EXPECT_EQ(ClassifyAutoScalingResponse(throttled), Outcome::kThrottled);
  HttpResponse validation;
  validation.status = 400;
  validation.body = ErrorXml("ValidationError", "x");
  EXPECT_EQ(ClassifyAutoScalingResponse(validation), Outcome::kFatal);
  HttpResponse bare503;
  bare503.status = 503;
  EXPECT_EQ(ClassifyAutoScalingResponse(bare503), Outcome::kServerError);
  EXPECT_EQ(ClassifyAutoScalingResponse(Status::Unavailable("reset")), Outcome::kTransient);
}

}  // namespace
}  // namespace sg
