// The AWS credentials chain: which source wins, what the container and
// instance-role sources send, when temporary credentials are renewed, and
// that secrets stay out of errors and logs.
#include "common/aws_credentials.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <deque>
#include <map>
#include <sstream>

#include "tests/support/fake_clock.h"
#include "tests/support/scripted_transport.h"
#include "tests/support/temp_dir.h"

namespace sg {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

using testing::ScriptedTransport;

// Answers GET /latest/<path> from a map; records every path asked for.
class FakeMetadata final : public MetadataService {
 public:
  StatusOr<std::string> Get(std::string_view path) override {
    calls.emplace_back(path);
    auto it = answers.find(std::string(path));
    if (it == answers.end()) return Status::NotFound("no " + std::string(path));
    return it->second;
  }
  std::map<std::string, StatusOr<std::string>> answers;
  std::vector<std::string> calls;
};

// Sends the process's log lines to a string while alive.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>(
        "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_));
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(std::move(logger));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

constexpr char kRoleSecret[] = "RoleSecret/XyZZYplugh+9876-never-print";
constexpr char kRoleToken[] = "RoleToken-FwoGZXIvYXdzEXAMPLE-never-print";

std::string CredentialsJson(const std::string& key_id, const std::string& secret,
                            const std::string& token, const std::string& expiration) {
  return "{\"Code\":\"Success\",\"LastUpdated\":\"2026-11-18T10:00:00Z\",\"Type\":\"AWS-HMAC\","
         "\"AccessKeyId\":\"" +
         key_id + "\",\"SecretAccessKey\":\"" + secret + "\",\"Token\":\"" + token +
         "\",\"Expiration\":\"" + expiration + "\"}";
}

class CredentialsChainTest : public ::testing::Test {
 protected:
  // HOME points at an empty directory so that no real ~/.aws/credentials is read.
  std::map<std::string, std::string> Env(std::map<std::string, std::string> extra = {}) {
    extra.emplace("HOME", home_.path());
    return extra;
  }
  std::string CredentialsFile(const std::string& text) {
    return files_.WriteFile("credentials", text);
  }
  void GiveInstanceRole(const std::string& key_id, Clock::WallTime expiration) {
    imds_.answers.insert_or_assign("meta-data/iam/security-credentials/",
                                   std::string("spot-role\n"));
    imds_.answers.insert_or_assign(
        "meta-data/iam/security-credentials/spot-role",
        CredentialsJson(key_id, kRoleSecret, kRoleToken, FormatUtc(expiration)));
  }

  testing::TempDir home_;
  testing::TempDir files_;
  ScriptedTransport transport_;
  testing::FakeClock clock_;
  FakeMetadata imds_;
};

constexpr char kTwoProfiles[] =
    "[default]\n"
    "aws_access_key_id = AKIDDEFAULT\n"
    "aws_secret_access_key = default-secret\n"
    "\n"
    "[work]\n"
    "aws_access_key_id=AKIDWORK\n"
    "aws_secret_access_key=work-secret\n"
    "aws_session_token=work-token\n";

TEST_F(CredentialsChainTest, EnvironmentKeysWinOverEveryOtherSource) {
  GiveInstanceRole("ASIAROLE", clock_.Now() + std::chrono::hours(1));
  DefaultCredentialsChain chain(
      Env({{"AWS_ACCESS_KEY_ID", "AKIDENV"},
           {"AWS_SECRET_ACCESS_KEY", "env-secret"},
           {"AWS_SESSION_TOKEN", "env-token"},
           {"AWS_PROFILE", "work"},
           {"AWS_SHARED_CREDENTIALS_FILE", CredentialsFile(kTwoProfiles)},
           {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/x"}}),
      transport_, clock_, &imds_);
  auto c = chain.Get();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id, "AKIDENV");
  EXPECT_EQ(c->secret_access_key, "env-secret");
  EXPECT_EQ(c->session_token, "env-token");
  EXPECT_EQ(chain.source(), "environment");
  EXPECT_TRUE(transport_.sent.empty());
  EXPECT_TRUE(imds_.calls.empty());
}

TEST_F(CredentialsChainTest, EnvironmentKeysWithoutTokenHaveNoSessionToken) {
  DefaultCredentialsChain chain(
      Env({{"AWS_ACCESS_KEY_ID", "AKIDENV"}, {"AWS_SECRET_ACCESS_KEY", "env-secret"}}), transport_,
      clock_, &imds_);
  auto c = chain.Get();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->session_token, "");
}

TEST_F(CredentialsChainTest, OnlyKeyIdOrOnlySecretIsAClearError) {
  for (const auto& [name, value] : std::map<std::string, std::string>{
           {"AWS_ACCESS_KEY_ID", "AKIDALONE"}, {"AWS_SECRET_ACCESS_KEY", "lonely-secret-77"}}) {
    SCOPED_TRACE(name);
    GiveInstanceRole("ASIAROLE", clock_.Now() + std::chrono::hours(1));
    DefaultCredentialsChain chain(Env({{name, value}}), transport_, clock_, &imds_);
    auto c = chain.Get();
    ASSERT_FALSE(c.ok()) << "half a key pair must not silently fall through to another source";
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find("AWS_ACCESS_KEY_ID"), std::string::npos);
    EXPECT_NE(c.status().message().find("AWS_SECRET_ACCESS_KEY"), std::string::npos);
    EXPECT_EQ(c.status().message().find("lonely-secret-77"), std::string::npos);
    EXPECT_TRUE(imds_.calls.empty());
  }
}

TEST_F(CredentialsChainTest, ReadsTheProfileNamedByAwsProfile) {
  DefaultCredentialsChain chain(
      Env({{"AWS_PROFILE", "work"},
           {"AWS_SHARED_CREDENTIALS_FILE", CredentialsFile(kTwoProfiles)}}),
      transport_, clock_, &imds_);
  auto c = chain.Get();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id, "AKIDWORK");
  EXPECT_EQ(c->secret_access_key, "work-secret");
  EXPECT_EQ(c->session_token, "work-token");
  EXPECT_EQ(chain.source(), "profile work");
}

TEST_F(CredentialsChainTest, UsesTheDefaultProfileWhenAwsProfileIsUnset) {
  DefaultCredentialsChain chain(
      Env({{"AWS_SHARED_CREDENTIALS_FILE", CredentialsFile(kTwoProfiles)}}), transport_, clock_,
      &imds_);
  auto c = chain.Get();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id, "AKIDDEFAULT");
  EXPECT_EQ(c->secret_access_key, "default-secret");
  EXPECT_EQ(c->session_token, "");
  EXPECT_EQ(chain.source(), "profile default");
}

TEST_F(CredentialsChainTest, FindsTheCredentialsFileUnderHome) {
  home_.WriteFile(".aws/credentials", kTwoProfiles);
  DefaultCredentialsChain chain(Env(), transport_, clock_, &imds_);
  auto c = chain.Get();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id, "AKIDDEFAULT");
}

TEST_F(CredentialsChainTest, ReadsProfilePrefixedSections) {
  DefaultCredentialsChain chain(
      Env({{"AWS_PROFILE", "ci"},
           {"AWS_SHARED_CREDENTIALS_FILE",
            CredentialsFile("[profile other]\naws_access_key_id=AKIDOTHER\n"
                            "aws_secret_access_key=other-secret\n"
                            "[profile ci]\naws_access_key_id=AKIDCI\n"
                            "aws_secret_access_key=ci-secret\n")}}),
      transport_, clock_, &imds_);
  auto c = chain.Get();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id, "AKIDCI");
  EXPECT_EQ(c->secret_access_key, "ci-secret");
}

TEST_F(CredentialsChainTest, MissingNamedProfileIsNotFoundAndNamesIt) {
  GiveInstanceRole("ASIAROLE", clock_.Now() + std::chrono::hours(1));
  DefaultCredentialsChain chain(
      Env({{"AWS_PROFILE", "nightly-batch"},
           {"AWS_SHARED_CREDENTIALS_FILE", CredentialsFile(kTwoProfiles)}}),
      transport_, clock_, &imds_);
  auto c = chain.Get();
  ASSERT_FALSE(c.ok()) << "a profile asked for by name must not fall back to another source";
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("nightly-batch"), std::string::npos) << c.status().message();
  EXPECT_TRUE(imds_.calls.empty());
}

TEST_F(CredentialsChainTest, NamedProfileWithoutACredentialsFileIsNotFound) {
  DefaultCredentialsChain chain(
      Env({{"AWS_PROFILE", "work"},
           {"AWS_SHARED_CREDENTIALS_FILE", files_.Join("does-not-exist")}}),
      transport_, clock_, &imds_);
  auto c = chain.Get();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("AWS_PROFILE=work"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("does-not-exist"), std::string::npos);
}

TEST_F(CredentialsChainTest, FileWithoutADefaultProfileFallsThroughToTheInstanceRole) {
  GiveInstanceRole("ASIAROLE", clock_.Now() + std::chrono::hours(1));
  DefaultCredentialsChain chain(
      Env({{"AWS_SHARED_CREDENTIALS_FILE",
            CredentialsFile("[work]\naws_access_key_id=A\naws_secret_access_key=B\n")}}),
      transport_, clock_, &imds_);
  auto c = chain.Get();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id, "ASIAROLE");
}

TEST(SharedCredentials, CommentsAreIgnored) {
  const std::string text =
      "# [default]\n"
      "; aws_access_key_id = AKIDCOMMENTED\n"
      "[other]\n"
      "aws_access_key_id = AKIDOTHER\n"
      "aws_secret_access_key = other\n"
      "  # a comment in the right section\n"
      "[default]\n"
      "# aws_access_key_id = AKIDCOMMENTED\n"
      "aws_access_key_id = AKIDREAL\n"
      "; aws_secret_access_key = commented-secret\n"
      "aws_secret_access_key = real-secret\n"
      "\n"
      "[after]\n"
      "aws_access_key_id = AKIDAFTER\n";
  auto c = ParseSharedCredentials(text, "default");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials.access_key_id, "AKIDREAL");
  EXPECT_EQ(c->credentials.secret_access_key, "real-secret");
  EXPECT_FALSE(c->expiration.has_value());

  // A commented-out section header is not a section.
  auto none = ParseSharedCredentials("# [ghost]\n", "ghost");
  EXPECT_TRUE(none.status().Is(StatusCode::kNotFound)) << none.status().ToString();
}

TEST(SharedCredentials, WindowsLineEndingsAndSpacesAroundNamesAreTolerated) {
  auto c = ParseSharedCredentials(
      "[default]\r\naws_access_key_id=AKIDD\r\naws_secret_access_key=dd\r\n"
      "[ spaced ]\r\n  AWS_ACCESS_KEY_ID  =  AKIDS \r\naws_secret_access_key = ss\r\n",
      "spaced");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials.access_key_id, "AKIDS");
  EXPECT_EQ(c->credentials.secret_access_key, "ss");
  EXPECT_EQ(c->source, "profile spaced");
}

TEST(SharedCredentials, AProfileWithoutTheSecretIsInvalidAndDoesNotEchoValues) {
  auto c = ParseSharedCredentials(
      "[default]\naws_access_key_id = AKIDONLY\n"
      "aws_session_token = tok-should-not-appear\n",
      "default");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("aws_secret_access_key"), std::string::npos);
  EXPECT_EQ(c.status().message().find("tok-should-not-appear"), std::string::npos);
}

TEST_F(CredentialsChainTest, ContainerRelativeUriGoesToTheEcsAgentAddress) {
  transport_.Reply(200, CredentialsJson("ASIACONTAINER", "container-secret", "container-token",
                                        FormatUtc(clock_.Now() + std::chrono::hours(6))));
  DefaultCredentialsChain chain(
      Env({{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/7f3c-uuid"}}), transport_,
      clock_, &imds_);
  auto c = chain.Get();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id, "ASIACONTAINER");
  EXPECT_EQ(c->secret_access_key, "container-secret");
  EXPECT_EQ(c->session_token, "container-token");
  EXPECT_EQ(chain.source(), "container");
  ASSERT_EQ(transport_.sent.size(), 1u);
  const HttpRequest& req = transport_.sent[0];
  EXPECT_EQ(req.method, "GET");
  EXPECT_EQ(req.url, "http://169.254.170.2/v2/credentials/7f3c-uuid");
  EXPECT_TRUE(req.headers.empty()) << "no token was configured";
  EXPECT_TRUE(req.no_proxy) << "link-local: never through a proxy";
  EXPECT_TRUE(imds_.calls.empty());
}

TEST_F(CredentialsChainTest, ContainerFullUriSendsTheAuthorizationToken) {
  transport_.Reply(200, CredentialsJson("ASIAPOD", "pod-secret", "pod-token",
                                        FormatUtc(clock_.Now() + std::chrono::hours(6))));
  DefaultCredentialsChain chain(
      Env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:8080/creds"},
           {"AWS_CONTAINER_AUTHORIZATION_TOKEN", "Bearer abc123"}}),
      transport_, clock_, &imds_);
  auto c = chain.Get();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id, "ASIAPOD");
  ASSERT_EQ(transport_.sent.size(), 1u);
  EXPECT_EQ(transport_.sent[0].url, "http://127.0.0.1:8080/creds");
  ASSERT_EQ(transport_.sent[0].headers.size(), 1u);
  EXPECT_EQ(transport_.sent[0].headers[0].first, "Authorization");
  EXPECT_EQ(transport_.sent[0].headers[0].second, "Bearer abc123");
}

TEST_F(CredentialsChainTest, ContainerTokenFileIsReadTrimmedAndPreferredOverTheVariable) {
  transport_.Reply(200, CredentialsJson("ASIAEKS", "eks-secret", "eks-token",
                                        FormatUtc(clock_.Now() + std::chrono::hours(6))));
  DefaultCredentialsChain chain(
      Env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://169.254.170.23/v1/credentials"},
           {"AWS_CONTAINER_AUTHORIZATION_TOKEN", "stale-token"},
           {"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            files_.WriteFile("eks-pod-identity-token", "file-token-xyz\n")}}),
      transport_, clock_, &imds_);
  auto c = chain.Get();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id, "ASIAEKS");
  ASSERT_EQ(transport_.sent.size(), 1u);
  EXPECT_EQ(transport_.sent[0].url, "http://169.254.170.23/v1/credentials");
  ASSERT_EQ(transport_.sent[0].headers.size(), 1u);
  EXPECT_EQ(transport_.sent[0].headers[0].first, "Authorization");
  EXPECT_EQ(transport_.sent[0].headers[0].second, "file-token-xyz");
}

TEST_F(CredentialsChainTest, ContainerEndpointErrorIsUnavailable) {
  transport_.Reply(500, "{\"SecretAccessKey\":\"half-a-secret-in-an-error-page\"");
  DefaultCredentialsChain chain(
      Env({{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/x"}}), transport_, clock_,
      &imds_);
  auto c = chain.Get();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("500"), std::string::npos) << c.status().message();
  EXPECT_EQ(c.status().message().find("half-a-secret"), std::string::npos);
}

TEST_F(CredentialsChainTest, InstanceRoleListsTheRoleThenFetchesItsCredentials) {
  GiveInstanceRole("ASIAROLE", clock_.Now() + std::chrono::hours(6));
  DefaultCredentialsChain chain(Env(), transport_, clock_, &imds_);
  auto c = chain.Get();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id, "ASIAROLE");
  EXPECT_EQ(c->secret_access_key, kRoleSecret);
  EXPECT_EQ(c->session_token, kRoleToken);
  EXPECT_EQ(chain.source(), "instance role spot-role");
  EXPECT_EQ(imds_.calls,
            (std::vector<std::string>{"meta-data/iam/security-credentials/",
                                      "meta-data/iam/security-credentials/spot-role"}));
  EXPECT_TRUE(transport_.sent.empty());
}

TEST_F(CredentialsChainTest, AnInstanceWithoutARoleIsNotFound) {
  DefaultCredentialsChain chain(Env(), transport_, clock_, &imds_);  // IMDS answers 404
  auto c = chain.Get();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("instance role"), std::string::npos);
}

TEST_F(CredentialsChainTest, Ec2MetadataDisabledSkipsTheInstanceRole) {
  GiveInstanceRole("ASIAROLE", clock_.Now() + std::chrono::hours(6));
  for (const char* value : {"true", "TRUE"}) {
    SCOPED_TRACE(value);
    DefaultCredentialsChain chain(Env({{"AWS_EC2_METADATA_DISABLED", value}}), transport_, clock_,
                                  &imds_);
    auto c = chain.Get();
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
    EXPECT_NE(c.status().message().find("no AWS credentials"), std::string::npos)
        << c.status().message();
  }
  EXPECT_TRUE(imds_.calls.empty());
}

TEST_F(CredentialsChainTest, NoSourceAtAllSaysThereAreNoCredentials) {
  DefaultCredentialsChain chain(Env(), transport_, clock_, /*imds=*/nullptr);
  auto c = chain.Get();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("no AWS credentials"), std::string::npos);
}

TEST_F(CredentialsChainTest, CachesTemporaryCredentialsUntilFiveMinutesBeforeExpiry) {
  const Clock::WallTime expiry = clock_.Now() + std::chrono::hours(1);
  GiveInstanceRole("ASIAFIRST", expiry);
  DefaultCredentialsChain chain(Env(), transport_, clock_, &imds_);
  ASSERT_EQ(chain.Get()->access_key_id, "ASIAFIRST");
  ASSERT_EQ(imds_.calls.size(), 2u);

  GiveInstanceRole("ASIASECOND", expiry + std::chrono::hours(1));
  clock_.Advance(minutes(30));
  EXPECT_EQ(chain.Get()->access_key_id, "ASIAFIRST");
  clock_.Advance(minutes(24) + seconds(59));  // 5 min 1 s before expiry
  EXPECT_EQ(chain.Get()->access_key_id, "ASIAFIRST");
  EXPECT_EQ(imds_.calls.size(), 2u) << "cached: no new fetch";

  clock_.Advance(seconds(2));  // 4 min 59 s before expiry
  EXPECT_EQ(chain.Get()->access_key_id, "ASIASECOND");
  EXPECT_EQ(imds_.calls.size(), 4u);
  EXPECT_EQ(chain.Get()->access_key_id, "ASIASECOND");
  EXPECT_EQ(imds_.calls.size(), 4u) << "the renewed ones are cached in turn";
}

TEST_F(CredentialsChainTest, KeepsCurrentCredentialsWhenRenewalFailsUntilTheyExpire) {
  LogCapture log;
  const Clock::WallTime expiry = clock_.Now() + std::chrono::hours(1);
  GiveInstanceRole("ASIAFIRST", expiry);
  DefaultCredentialsChain chain(Env(), transport_, clock_, &imds_);
  ASSERT_EQ(chain.Get()->access_key_id, "ASIAFIRST");

  imds_.answers.insert_or_assign("meta-data/iam/security-credentials/spot-role",
                                 Status::Unavailable("IMDS timed out"));
  clock_.Advance(minutes(57));
  auto still = chain.Get();
  ASSERT_TRUE(still.ok()) << still.status().ToString();
  EXPECT_EQ(still->access_key_id, "ASIAFIRST");
  EXPECT_EQ(still->secret_access_key, kRoleSecret);
  EXPECT_EQ(imds_.calls.size(), 4u) << "renewal was tried";

  clock_.Advance(minutes(3) + seconds(1));  // past the expiry
  auto expired = chain.Get();
  ASSERT_FALSE(expired.ok()) << "expired credentials are never handed out";
  EXPECT_EQ(expired.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(expired.status().message().find("IMDS timed out"), std::string::npos);

  for (const std::string& text : {expired.status().ToString(), log.text()}) {
    EXPECT_EQ(text.find(kRoleSecret), std::string::npos) << text;
    EXPECT_EQ(text.find(kRoleToken), std::string::npos) << text;
  }
  EXPECT_NE(log.text().find("instance role spot-role"), std::string::npos)
      << "the log says where credentials came from: " << log.text();
}

TEST(CredentialsJson, ErrorsNeverEchoTheBody) {
  const std::string secret = "JsonSecret/qwertyuiop+0000";
  const std::string bodies[] = {
      "{\"AccessKeyId\":\"ASIA\",\"SecretAccessKey\":\"" + secret + "\"",  // cut short
      "{\"Code\":\"Failure\",\"SecretAccessKey\":\"" + secret + "\"}",
      "{\"AccessKeyId\":\"\",\"SecretAccessKey\":\"" + secret + "\"}",
      "{\"AccessKeyId\":\"ASIA\",\"SecretAccessKey\":\"" + secret +
          "\",\"Expiration\":\"tomorrow\"}",
  };
  for (const std::string& body : bodies) {
    auto c = ParseCredentialsJson(body, "container");
    ASSERT_FALSE(c.ok()) << body;
    EXPECT_EQ(c.status().ToString().find(secret), std::string::npos) << c.status().ToString();
  }
}

TEST(CredentialsJson, ReadsKeysTokenAndExpiration) {
  auto c = ParseCredentialsJson(CredentialsJson("ASIAX", "s3cr3t", "tok", "2026-11-22T14:00:00Z"),
                                "instance role r");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials.access_key_id, "ASIAX");
  EXPECT_EQ(c->credentials.secret_access_key, "s3cr3t");
  EXPECT_EQ(c->credentials.session_token, "tok");
  ASSERT_TRUE(c->expiration.has_value());
  EXPECT_EQ(*c->expiration, std::chrono::system_clock::from_time_t(1795356000));
  EXPECT_EQ(c->source, "instance role r");
}

TEST(AwsIso8601, AcceptsUtcInItsCommonSpellings) {
  const auto expected = std::chrono::system_clock::from_time_t(1795356000);  // 2026-11-22 14:00 UTC
  for (const char* text : {"2026-11-22T14:00:00Z", "2026-11-22T14:00:00.123Z",
                           "2026-11-22T14:00:00.5+00:00", "2026-11-22T14:00:00+00:00"}) {
    auto t = ParseIso8601(text);
    ASSERT_TRUE(t.ok()) << text << ": " << t.status().ToString();
    EXPECT_EQ(*t, expected) << text;
  }
  EXPECT_EQ(*ParseIso8601("1970-01-01T00:00:00Z"), std::chrono::system_clock::from_time_t(0));
}

TEST(AwsIso8601, RejectsGarbageAndOtherTimeZones) {
  for (const char* text : {"", "garbage", "2026-11-22", "2026-11-22T14:00", "22/11/2026 14:00:00",
                           "2026-11-22T14:00:00+02:00", "2026-11-22T14:00:00-05:00",
                           "2026-11-22T14:00:00Zjunk", "2026-11-22T14:00:00 PST"}) {
    auto t = ParseIso8601(text);
    EXPECT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << text;
  }
}

}  // namespace
}  // namespace sg
