// ImdsClient against a scripted transport: token reuse, renewal before expiry
// and after a 401, and how errors are reported. The real simulator is used in
// tests/imds.
#include "common/imds_client.h"

#include <gtest/gtest.h>

#include <deque>

#include "tests/support/fake_clock.h"
#include "tests/support/scripted_transport.h"

namespace sg {
namespace {

using testing::ScriptedTransport;

class ImdsClientTest : public ::testing::Test {
 protected:
  ImdsClient::Options Options() {
    ImdsClient::Options o;
    o.endpoint = "http://imds.test";
    o.token_ttl = std::chrono::seconds(600);
    o.refresh_margin = std::chrono::seconds(60);
    return o;
  }
  ScriptedTransport transport_;
  testing::FakeClock clock_;
};

TEST_F(ImdsClientTest, TakesATokenOnceAndSendsItOnEveryGet) {
  ImdsClient client(transport_, clock_, Options());
  transport_.Reply(200, "TOKEN-1");
  transport_.Reply(200, "i-1");
  transport_.Reply(200, "i-1");
  EXPECT_EQ(*client.Get("meta-data/instance-id"), "i-1");
  EXPECT_EQ(*client.Get("meta-data/instance-id"), "i-1");
  ASSERT_EQ(transport_.sent.size(), 3u);
  EXPECT_EQ(transport_.sent[0].method, "PUT");
  EXPECT_EQ(transport_.sent[0].url, "http://imds.test/latest/api/token");
  EXPECT_EQ(transport_.sent[0].headers.at(0).first, "X-aws-ec2-metadata-token-ttl-seconds");
  EXPECT_EQ(transport_.sent[0].headers.at(0).second, "600");
  for (int i : {1, 2}) {
    EXPECT_EQ(transport_.sent[i].url, "http://imds.test/latest/meta-data/instance-id");
    ASSERT_EQ(transport_.sent[i].headers.size(), 1u);
    EXPECT_EQ(transport_.sent[i].headers[0].second, "TOKEN-1");
  }
  EXPECT_EQ(transport_.sent[1].timeout, std::chrono::milliseconds(1000));
}

TEST_F(ImdsClientTest, RenewsTheTokenBeforeItExpires) {
  ImdsClient client(transport_, clock_, Options());
  transport_.Reply(200, "TOKEN-1");
  transport_.Reply(200, "a");
  ASSERT_TRUE(client.Get("meta-data/x").ok());
  clock_.Advance(std::chrono::seconds(541));  // inside the 60 s margin before 600 s
  transport_.Reply(200, "TOKEN-2");
  transport_.Reply(200, "b");
  ASSERT_TRUE(client.Get("meta-data/x").ok());
  ASSERT_EQ(transport_.sent.size(), 4u);
  EXPECT_EQ(transport_.sent[2].method, "PUT");
  EXPECT_EQ(transport_.sent[3].headers[0].second, "TOKEN-2");
}

TEST_F(ImdsClientTest, ReplacesARejectedTokenOnceAfter401) {
  ImdsClient client(transport_, clock_, Options());
  transport_.Reply(200, "OLD");
  transport_.Reply(401);
  transport_.Reply(200, "NEW");
  transport_.Reply(200, "body");
  auto r = client.Get("meta-data/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "body");
  ASSERT_EQ(transport_.sent.size(), 4u);
  ASSERT_EQ(transport_.sent[3].headers.size(), 1u) << "the header is replaced, not added";
  EXPECT_EQ(transport_.sent[3].headers[0].second, "NEW");
}

TEST_F(ImdsClientTest, NotFoundMeansAbsentAndOtherStatusesAreUnavailable) {
  ImdsClient client(transport_, clock_, Options());
  transport_.Reply(200, "T");
  transport_.Reply(404);
  transport_.Reply(500);
  EXPECT_TRUE(client.Get("meta-data/spot/instance-action").status().Is(StatusCode::kNotFound));
  auto r = client.Get("meta-data/spot/instance-action");
  EXPECT_TRUE(r.status().Is(StatusCode::kUnavailable));
  EXPECT_NE(r.status().message().find("500"), std::string::npos);
}

TEST_F(ImdsClientTest, ATokenRefusalIsUnavailableAndNeverShowsTheToken) {
  ImdsClient client(transport_, clock_, Options());
  transport_.Reply(200, "SECRET-TOKEN");
  transport_.Reply(401);
  transport_.Reply(403);
  auto r = client.Get("meta-data/x");
  ASSERT_TRUE(r.status().Is(StatusCode::kUnavailable));
  EXPECT_NE(r.status().message().find("403"), std::string::npos);
  EXPECT_EQ(r.status().message().find("SECRET-TOKEN"), std::string::npos);
}

TEST_F(ImdsClientTest, RetriesWhenNothingAnswersWithBackoffThroughTheClock) {
  ImdsClient client(transport_, clock_, Options(), [] { return 0.5; });
  transport_.replies.push_back(Status::Unavailable("connection refused"));
  transport_.Reply(200, "T");
  transport_.replies.push_back(Status::Unavailable("timed out"));
  transport_.replies.push_back(Status::Unavailable("timed out"));
  transport_.Reply(200, "body");
  const auto start = clock_.Monotonic();
  auto r = client.Get("meta-data/x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "body");
  ASSERT_EQ(transport_.sent.size(), 5u);
  EXPECT_EQ(transport_.sent[1].method, "PUT");
  EXPECT_EQ(transport_.sent[4].url, "http://imds.test/latest/meta-data/x");
  // Half of 100 ms before each first retry, half of 200 ms before the second.
  EXPECT_EQ(clock_.Monotonic() - start, std::chrono::milliseconds(50 + 50 + 100));
}

TEST_F(ImdsClientTest, GivesUpAfterMaxAttemptsSayingNothingAnswered) {
  auto options = Options();
  options.max_attempts = 3;
  ImdsClient client(transport_, clock_, options, [] { return 0.0; });
  for (int i = 0; i < 3; ++i) transport_.replies.push_back(Status::Unavailable("refused"));
  auto r = client.Get("meta-data/x");
  ASSERT_TRUE(r.status().Is(StatusCode::kUnavailable));
  EXPECT_EQ(r.status().reason(), kImdsNoAnswer);
  EXPECT_NE(r.status().message().find("after 3 attempts: refused"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(transport_.sent.size(), 3u);
}

TEST_F(ImdsClientTest, HttpErrorsAreNeverRetried) {
  ImdsClient client(transport_, clock_, Options());
  transport_.Reply(200, "T");
  transport_.Reply(500);
  transport_.Reply(200, "not reached");
  auto r = client.Get("meta-data/x");
  EXPECT_EQ(r.status().reason(), kImdsHttpError);
  EXPECT_EQ(transport_.sent.size(), 2u);
}

TEST_F(ImdsClientTest, ATokenRefusalNamesTheStatus) {
  for (long status : {400L, 403L, 405L}) {
    ScriptedTransport transport;
    ImdsClient client(transport, clock_, Options());
    transport.Reply(status);
    auto r = client.Get("meta-data/x");
    ASSERT_TRUE(r.status().Is(StatusCode::kUnavailable)) << status;
    EXPECT_EQ(r.status().reason(), kImdsHttpError);
    EXPECT_NE(r.status().message().find("token request"), std::string::npos);
    EXPECT_NE(r.status().message().find("HTTP " + std::to_string(status)), std::string::npos);
    EXPECT_EQ(transport.sent.size(), 1u) << "a refused token is not asked for again at once";
  }
}

TEST_F(ImdsClientTest, ATokenIsTakenAgainAfterARefusal) {
  ImdsClient client(transport_, clock_, Options());
  transport_.Reply(403);
  EXPECT_FALSE(client.Get("meta-data/x").ok());
  transport_.Reply(200, "T2");
  transport_.Reply(200, "ok");
  EXPECT_TRUE(client.Get("meta-data/x").ok());
  EXPECT_EQ(transport_.sent[2].headers[0].second, "T2");
}

TEST_F(ImdsClientTest, DisabledSendsNothing) {
  auto options = Options();
  options.disabled = true;
  ImdsClient client(transport_, clock_, options);
  auto r = client.Get("meta-data/x");
  EXPECT_EQ(r.status().reason(), kImdsDisabled);
  EXPECT_NE(r.status().message().find("AWS_EC2_METADATA_DISABLED"), std::string::npos);
  EXPECT_TRUE(transport_.sent.empty());
}

TEST(ImdsOptionsFromEnvironment, ConfiguredThenEnvironmentThenDefault) {
  EXPECT_EQ(ImdsOptionsFromEnvironment("", {}).endpoint, "http://169.254.169.254");
  EXPECT_EQ(ImdsOptionsFromEnvironment(
                "", {{"AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://[fd00:ec2::254]/"}})
                .endpoint,
            "http://[fd00:ec2::254]");
  EXPECT_EQ(ImdsOptionsFromEnvironment("http://127.0.0.1:1338",
                                       {{"AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://x"}})
                .endpoint,
            "http://127.0.0.1:1338");
  EXPECT_FALSE(ImdsOptionsFromEnvironment("", {}).disabled);
  EXPECT_TRUE(ImdsOptionsFromEnvironment("", {{"AWS_EC2_METADATA_DISABLED", "TRUE"}}).disabled);
  EXPECT_FALSE(ImdsOptionsFromEnvironment("", {{"AWS_EC2_METADATA_DISABLED", "false"}}).disabled);
  const auto defaults = ImdsOptionsFromEnvironment("", {});
  EXPECT_EQ(defaults.token_ttl, std::chrono::seconds(21600));
  EXPECT_EQ(defaults.timeout, std::chrono::milliseconds(1000));
}

TEST_F(ImdsClientTest, ReadsTheInstanceIdentityAndLifeCycle) {
  ImdsClient client(transport_, clock_, Options());
  transport_.Reply(200, "T");
  transport_.Reply(200, R"({"instanceId": "i-1", "region": "eu-west-1",
      "availabilityZone": "eu-west-1b", "instanceType": "p4d.24xlarge", "kernelId": null})");
  transport_.Reply(200, "spot");
  auto id = ReadInstanceIdentity(client);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->instance_id, "i-1");
  EXPECT_EQ(id->region, "eu-west-1");
  EXPECT_EQ(id->availability_zone, "eu-west-1b");
  EXPECT_EQ(id->instance_type, "p4d.24xlarge");
  EXPECT_EQ(id->life_cycle, "spot");
  EXPECT_EQ(transport_.sent[1].url, "http://imds.test/latest/dynamic/instance-identity/document");
  EXPECT_EQ(transport_.sent[2].url, "http://imds.test/latest/meta-data/instance-life-cycle");
}

TEST_F(ImdsClientTest, AMissingLifeCycleIsEmptyButABadDocumentIsAnError) {
  ImdsClient client(transport_, clock_, Options());
  transport_.Reply(200, "T");
  transport_.Reply(200, R"({"instanceId": "i-1", "region": "r", "availabilityZone": "ra",
      "instanceType": "t"})");
  transport_.Reply(404);
  auto id = ReadInstanceIdentity(client);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->life_cycle, "");

  auto missing = ParseIdentityDocument(R"({"instanceId": "i-1", "region": "r"})");
  EXPECT_TRUE(missing.status().Is(StatusCode::kCorruption));
  EXPECT_NE(missing.status().message().find("no \"availabilityZone\""), std::string::npos);
  auto garbage = ParseIdentityDocument(std::string("{\"inst\xff", 7));
  EXPECT_TRUE(garbage.status().Is(StatusCode::kCorruption));
  EXPECT_NE(garbage.status().message().find("\\xff"), std::string::npos);
}

TEST(PrintableExcerpt, EscapesWhatIsNotPrintableAndShortens) {
  EXPECT_EQ(PrintableExcerpt(std::string("a\x01\n\\b", 5)), "a\\x01\\x0a\\\\b");
  EXPECT_EQ(PrintableExcerpt(std::string(100, 'x'), 10), std::string(10, 'x') + "...");
}

}  // namespace
}  // namespace sg
