// Web identity credentials (EKS IRSA): the settings from the environment,
// the STS call the chain makes, renewal with a rotated token, errors that
// name what is wrong and never carry the token.
#include "common/sts_web_identity.h"

#include <gtest/gtest.h>

#include "common/strings.h"
#include "tests/support/fake_clock.h"
#include "tests/support/scripted_transport.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

using std::chrono::minutes;
using testing::ScriptedTransport;

constexpr char kToken[] = "eyJhbGciOiJSUzI1NiJ9.secret-jwt-payload.never-print";
constexpr char kRole[] = "arn:aws:iam::123456789012:role/sweep";

std::string Answer(const std::string& key_id, const std::string& expiration) {
  return "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
         "<AssumeRoleWithWebIdentityResult><Credentials>"
         "<AccessKeyId>" +
         key_id +
         "</AccessKeyId>"
         "<SecretAccessKey>web-secret</SecretAccessKey>"
         "<SessionToken>web-session-token</SessionToken>"
         "<Expiration>" +
         expiration +
         "</Expiration>"
         "</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
}

class WebIdentityTest : public ::testing::Test {
 protected:
  std::map<std::string, std::string> Env(std::map<std::string, std::string> extra = {}) {
    extra.emplace("HOME", home_.path());
    extra.emplace("AWS_ROLE_ARN", kRole);
    extra.emplace("AWS_WEB_IDENTITY_TOKEN_FILE", token_file_);
    return extra;
  }
  testing::TempDir home_;
  testing::TempDir files_;
  std::string token_file_ = files_.WriteFile("token", std::string(kToken) + "\n");
  ScriptedTransport transport_;
  testing::FakeClock clock_;
};

TEST_F(WebIdentityTest, TheChainExchangesTheTokenWithStsAndRenewsWithTheRotatedOne) {
  DefaultCredentialsChain chain(Env({{"AWS_REGION", "eu-west-1"}}), transport_, clock_, nullptr);
  transport_.Reply(200, Answer("ASIAWEB1", FormatUtc(clock_.Now() + minutes(60))));
  auto creds = chain.Get();
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ(creds->access_key_id, "ASIAWEB1");
  EXPECT_EQ(creds->secret_access_key, "web-secret");
  EXPECT_EQ(creds->session_token, "web-session-token");
  EXPECT_EQ(chain.source(), std::string("web identity ") + kRole);
  ASSERT_EQ(transport_.sent.size(), 1u);
  const HttpRequest& req = transport_.sent[0];
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.url, "https://sts.eu-west-1.amazonaws.com/");
  EXPECT_NE(req.body.find("Action=AssumeRoleWithWebIdentity"), std::string::npos);
  EXPECT_NE(req.body.find("Version=2011-06-15"), std::string::npos);
  EXPECT_NE(req.body.find("RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fsweep"),
            std::string::npos)
      << req.body;
  EXPECT_NE(req.body.find(std::string("WebIdentityToken=") + kToken), std::string::npos)
      << "the token, without the file's newline";
  EXPECT_NE(req.body.find("RoleSessionName=spotguard-"), std::string::npos);
  bool signed_request = false;
  for (const auto& [name, value] : req.headers) signed_request |= ToLower(name) == "authorization";
  EXPECT_FALSE(signed_request) << "AssumeRoleWithWebIdentity is an unsigned call";

  // Cached until 5 minutes before the expiration; then the token file, which
  // the webhook rotates, is read again.
  clock_.Advance(minutes(50));
  EXPECT_TRUE(chain.Get().ok());
  EXPECT_EQ(transport_.sent.size(), 1u);
  files_.WriteFile("token", "rotated-token");
  clock_.Advance(minutes(6));
  transport_.Reply(200, Answer("ASIAWEB2", FormatUtc(clock_.Now() + minutes(60))));
  creds = chain.Get();
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ(creds->access_key_id, "ASIAWEB2");
  ASSERT_EQ(transport_.sent.size(), 2u);
  EXPECT_NE(transport_.sent[1].body.find("WebIdentityToken=rotated-token"), std::string::npos);
}

TEST_F(WebIdentityTest, EnvironmentKeysWinAndWebIdentityWinsOverAProfile) {
  DefaultCredentialsChain keys(
      Env({{"AWS_ACCESS_KEY_ID", "AKIDENV"}, {"AWS_SECRET_ACCESS_KEY", "env-secret"}}), transport_,
      clock_, nullptr);
  EXPECT_EQ(keys.Get()->access_key_id, "AKIDENV");
  EXPECT_TRUE(transport_.sent.empty());
  const std::string file = files_.WriteFile(
      "credentials", "[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = s\n");
  DefaultCredentialsChain web(Env({{"AWS_SHARED_CREDENTIALS_FILE", file}}), transport_, clock_,
                              nullptr);
  transport_.Reply(200, Answer("ASIAWEB", FormatUtc(clock_.Now() + minutes(60))));
  EXPECT_EQ(web.Get()->access_key_id, "ASIAWEB");
}

TEST_F(WebIdentityTest, TheEndpointComesFromTheEnvironmentTheRegionOrTheGlobalOne) {
  auto settings = [&](std::map<std::string, std::string> env) {
    env.emplace("AWS_ROLE_ARN", kRole);
    env.emplace("AWS_WEB_IDENTITY_TOKEN_FILE", token_file_);
    auto s = WebIdentityFromEnv(env, 1'795'000'000);
    EXPECT_TRUE(s.has_value() && s->ok());
    return **s;
  };
  EXPECT_EQ(settings({{"AWS_ENDPOINT_URL_STS", "http://127.0.0.1:9/"}}).endpoint,
            "http://127.0.0.1:9");
  EXPECT_EQ(settings({{"AWS_DEFAULT_REGION", "cn-north-1"}}).endpoint,
            "https://sts.cn-north-1.amazonaws.com.cn");
  EXPECT_EQ(settings({}).endpoint, "https://sts.amazonaws.com");
  EXPECT_EQ(settings({}).session_name, "spotguard-1795000000");
  EXPECT_EQ(settings({{"AWS_ROLE_SESSION_NAME", "trial-7"}}).session_name, "trial-7");
  EXPECT_FALSE(WebIdentityFromEnv({{"HOME", "/root"}}, 0).has_value());
}

TEST_F(WebIdentityTest, HalfTheSettingsOrARefusedTokenIsAClearErrorWithoutTheToken) {
  auto only_role = WebIdentityFromEnv({{"AWS_ROLE_ARN", kRole}}, 0);
  ASSERT_TRUE(only_role.has_value());
  ASSERT_FALSE(only_role->ok());
  EXPECT_NE(only_role->status().message().find("AWS_WEB_IDENTITY_TOKEN_FILE"), std::string::npos);

  DefaultCredentialsChain chain(Env(), transport_, clock_, nullptr);
  transport_.Reply(400,
                   "<ErrorResponse><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code>"
                   "<Message>Incorrect token audience</Message></Error></ErrorResponse>");
  auto refused = chain.Get();
  ASSERT_FALSE(refused.ok());
  const std::string message(refused.status().message());
  EXPECT_NE(message.find("InvalidIdentityToken"), std::string::npos) << message;
  EXPECT_NE(message.find(kRole), std::string::npos) << message;
  EXPECT_EQ(message.find(kToken), std::string::npos) << message;

  DefaultCredentialsChain missing(Env({{"AWS_WEB_IDENTITY_TOKEN_FILE", "/nonexistent/token"}}),
                                  transport_, clock_, nullptr);
  // Env() does not replace a key already given.
  auto unreadable = missing.Get();
  ASSERT_FALSE(unreadable.ok());
  EXPECT_NE(unreadable.status().message().find("/nonexistent/token"), std::string::npos);
}

}  // namespace
}  // namespace sg
