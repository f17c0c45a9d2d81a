// ImdsClient against a scripted transport: token reuse, renewal before expiry
// and after a 401, and how errors are reported. The real simulator is used in
// tests/imds.
#include "common/imds_client.h"

#include <gtest/gtest.h>

#include <deque>

#include "tests/support/fake_clock.h"

namespace sg {
namespace {

class ScriptedTransport final : public HttpTransport {
 public:
  StatusOr<HttpResponse> Send(const HttpRequest& request) override {
    sent.push_back(request);
    if (replies.empty()) return Status::Unavailable("no scripted reply");
    auto r = replies.front();
    replies.pop_front();
    return r;
  }
  void Reply(long status, std::string body = "") {
    HttpResponse r;
    r.status = status;
    r.body = std::move(body);
    replies.push_back(r);
  }
  std::deque<StatusOr<HttpResponse>> replies;
  std::vector<HttpRequest> sent;
};

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

}  // namespace
}  // namespace sg
