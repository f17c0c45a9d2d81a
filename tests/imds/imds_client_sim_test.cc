// ImdsClient and CurlTransport against the IMDS simulator, a real HTTP server
// following the documented IMDSv2 behaviour.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/http.h"
#include "common/imds_client.h"
#include "tests/support/subprocess.h"

namespace sg {
namespace {

using nlohmann::json;

class ImdsAgainstSimulator : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(sim_.endpoint().empty());
    ImdsClient::Options options;
    options.endpoint = sim_.endpoint();
    client_ = std::make_unique<ImdsClient>(transport_, SystemClock(), options);
  }
  json Requests() { return json::parse(sim_.Control("GET", "/_sim/requests")); }

  testing::ImdsSimulator sim_;
  CurlTransport transport_;
  std::unique_ptr<ImdsClient> client_;
};

TEST_F(ImdsAgainstSimulator, ReadsTheIdentityDocumentWithAToken) {
  auto doc = client_->Get("dynamic/instance-identity/document");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  auto j = json::parse(*doc);
  EXPECT_EQ(j["instanceId"], "i-0123456789abcdef0");
  EXPECT_EQ(j["region"], "us-east-1");
  auto log = Requests();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0]["method"], "PUT");
  EXPECT_EQ(log[1]["token"], "valid");
}

TEST_F(ImdsAgainstSimulator, NoNoticeIsNotFoundAndANoticeKeepsItsTime) {
  EXPECT_TRUE(client_->Get("meta-data/spot/instance-action").status().Is(StatusCode::kNotFound));
  sim_.Control("POST", "/_sim/spot-notice", R"({"action": "terminate", "in_seconds": 120})");
  auto first = client_->Get("meta-data/spot/instance-action");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto j = json::parse(*first);
  EXPECT_EQ(j["action"], "terminate");
  EXPECT_TRUE(j["time"].get<std::string>().ends_with("Z"));
  auto second = client_->Get("meta-data/spot/instance-action");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, *first);
}

TEST_F(ImdsAgainstSimulator, ReusesOneTokenForManyRequests) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client_->Get("meta-data/instance-id").ok());
  int puts = 0;
  for (const auto& r : Requests()) puts += r["method"] == "PUT";
  EXPECT_EQ(puts, 1);
}

TEST_F(ImdsAgainstSimulator, TakesAFreshTokenWhenTheServerExpiresIt) {
  ASSERT_TRUE(client_->Get("meta-data/instance-id").ok());
  sim_.Control("POST", "/_sim/expire-tokens");
  sim_.Control("DELETE", "/_sim/requests");
  auto r = client_->Get("meta-data/instance-id");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto log = Requests();
  ASSERT_EQ(log.size(), 3u) << log.dump();
  EXPECT_EQ(log[0]["status"], 401);
  EXPECT_EQ(log[1]["method"], "PUT");
  EXPECT_EQ(log[2]["token"], "valid");
  EXPECT_EQ(log[2]["status"], 200);
}

TEST_F(ImdsAgainstSimulator, ServerErrorsAreUnavailable) {
  sim_.Control("POST", "/_sim/fault",
               R"({"path": "/latest/meta-data/spot/instance-action", "status": 500, "count": 1})");
  auto r = client_->Get("meta-data/spot/instance-action");
  EXPECT_TRUE(r.status().Is(StatusCode::kUnavailable)) << r.status().ToString();
  EXPECT_TRUE(client_->Get("meta-data/spot/instance-action").status().Is(StatusCode::kNotFound));
}

TEST_F(ImdsAgainstSimulator, ASlowAnswerTimesOutAfterOneSecond) {
  ImdsClient::Options options;
  options.endpoint = sim_.endpoint();
  options.max_attempts = 1;  // a retry would get a fast answer
  ImdsClient client(transport_, SystemClock(), options);
  // The answer comes after 20 s: a client that waited for it would get it
  // (and fail the status checks). The upper bound only catches a hang; the
  // 1 s itself is checked exactly in unit/imds_client_test.cc, and a slow
  // machine only makes the request take longer than 1 s, never shorter.
  sim_.Control("POST", "/_sim/fault",
               R"({"path": "/latest/meta-data/instance-id", "delay_ms": 20000, "count": 1})");
  ASSERT_TRUE(client.Get("meta-data/ami-id").ok());  // token first, so only the GET is slow
  const auto start = std::chrono::steady_clock::now();
  auto r = client.Get("meta-data/instance-id");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(r.status().Is(StatusCode::kUnavailable)) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), kImdsNoAnswer);
  EXPECT_GE(took, std::chrono::milliseconds(1000));
  EXPECT_LT(took, std::chrono::seconds(15));
}

TEST_F(ImdsAgainstSimulator, ASlowAnswerIsTriedAgainAndTheRetryAnswers) {
  sim_.Control("POST", "/_sim/fault",
               R"({"path": "/latest/meta-data/instance-id", "delay_ms": 3000, "count": 1})");
  ASSERT_TRUE(client_->Get("meta-data/ami-id").ok());
  auto r = client_->Get("meta-data/instance-id");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "i-0123456789abcdef0");
}

TEST(ImdsUnreachable, ARefusedConnectionIsUnavailable) {
  CurlTransport transport;
  ImdsClient::Options options;
  options.endpoint = "http://127.0.0.1:9";  // discard port: nothing listens in tests
  ImdsClient client(transport, SystemClock(), options);
  auto r = client.Get("meta-data/instance-id");
  EXPECT_TRUE(r.status().Is(StatusCode::kUnavailable)) << r.status().ToString();
}

}  // namespace
}  // namespace sg
