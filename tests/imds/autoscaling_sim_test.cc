// AutoScalingClient over real HTTP against tests/tools/autoscaling_sim.py,
// which recomputes every SigV4 signature, checks the credential scope
// (service autoscaling, the region) and each action's parameters, answers in
// the documented XML shapes and keeps a log of the calls.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/autoscaling_client.h"
#include "common/clock.h"
#include "common/http.h"
#include "tests/support/subprocess.h"

namespace sg {
namespace {

using nlohmann::json;

constexpr char kAccessKey[] = "AKIDASGSIMTEST";
constexpr char kSecret[] = "asg/sim+Secret0123456789";
constexpr char kRegion[] = "eu-central-1";

class AutoScalingSim : public ::testing::Test {
 protected:
  AutoScalingSim()
      : sim_("autoscaling_sim.py",
             {"--region", kRegion, "--access-key", kAccessKey, "--secret-key", kSecret}) {
    sim_.Control("POST", "/_sim/groups",
                 R"({"name": "train-asg", "min": 1, "max": 2, "desired": 1, "hooks": ["drain"],
                     "instances": {"i-0aaa": "InService", "i-0bbb": "Terminating:Wait"}})");
  }
  std::unique_ptr<AutoScalingClient> Client(const std::string& secret = kSecret,
                                            const std::string& region = kRegion) {
    creds_ = std::make_unique<StaticCredentials>(AwsCredentials{kAccessKey, secret, ""});
    AutoScalingClientOptions o;
    o.region = region;
    o.endpoint = sim_.endpoint();
    o.retry.base_delay = Duration(1);
    return std::make_unique<AutoScalingClient>(transport_, *creds_, SystemClock(), o);
  }
  json Calls() { return json::parse(sim_.Control("GET", "/_sim/calls")); }
  json Group(const std::string& name) {
    return json::parse(sim_.Control("GET", "/_sim/groups"))[name];
  }

  testing::ToolServer sim_;
  CurlTransport transport_;
  std::unique_ptr<StaticCredentials> creds_;
};

TEST_F(AutoScalingSim, DescribeFindsTheInstancesGroup) {
  auto client = Client();
  auto i = client->DescribeAutoScalingInstance("i-0aaa");
  ASSERT_TRUE(i.ok()) << i.status().ToString();
  EXPECT_EQ(i->group_name, "train-asg");
  EXPECT_EQ(i->lifecycle_state, "InService");
  json calls = Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["action"], "DescribeAutoScalingInstances");
  EXPECT_EQ(calls[0]["params"]["InstanceIds.member.1"], "i-0aaa");
  EXPECT_EQ(calls[0]["service"], "autoscaling");
  EXPECT_EQ(calls[0]["region"], kRegion);
  EXPECT_EQ(calls[0]["status"], 200);
}

TEST_F(AutoScalingSim, AnInstanceOutsideEveryGroupIsNotFound) {
  auto i = Client()->DescribeAutoScalingInstance("i-0zzz");
  EXPECT_TRUE(i.status().Is(StatusCode::kNotFound)) << i.status().ToString();
  EXPECT_EQ(i.status().reason(), "NotInAutoScalingGroup");
}

TEST_F(AutoScalingSim, ScaleToZeroSetsMinAndDesiredCapacity) {
  Status st = Client()->UpdateAutoScalingGroup("train-asg", {.min_size = 0, .desired_capacity = 0});
  ASSERT_TRUE(st.ok()) << st.ToString();
  json g = Group("train-asg");
  EXPECT_EQ(g["min"], 0);
  EXPECT_EQ(g["desired"], 0);
  EXPECT_EQ(g["max"], 2);
  json calls = Calls();
  EXPECT_EQ(
      calls.back()["params"],
      json({{"AutoScalingGroupName", "train-asg"}, {"MinSize", "0"}, {"DesiredCapacity", "0"}}));
}

TEST_F(AutoScalingSim, AnUnknownGroupIsNotFoundWithTheServiceMessage) {
  Status st = Client()->UpdateAutoScalingGroup("no-such-asg", {.min_size = 0});
  EXPECT_TRUE(st.Is(StatusCode::kNotFound)) << st.ToString();
  EXPECT_EQ(st.reason(), "ValidationError");
  EXPECT_NE(st.message().find("no-such-asg"), std::string::npos) << st.message();
  EXPECT_EQ(Calls().size(), 1u);  // a validation error is not retried
}

TEST_F(AutoScalingSim, ADesiredCapacityOutsideMinAndMaxIsInvalid) {
  Status st = Client()->UpdateAutoScalingGroup("train-asg", {.desired_capacity = 5});
  EXPECT_TRUE(st.Is(StatusCode::kInvalidArgument)) << st.ToString();
  EXPECT_EQ(Group("train-asg")["desired"], 1);
}

TEST_F(AutoScalingSim, CompletingTheLifecycleActionLetsTheInstanceProceed) {
  Status st = Client()->CompleteLifecycleAction("train-asg", "drain", "i-0bbb");
  ASSERT_TRUE(st.ok()) << st.ToString();
  json g = Group("train-asg");
  EXPECT_EQ(g["instances"]["i-0bbb"], "Terminating:Proceed");
  EXPECT_EQ(g["completed"][0]["result"], "CONTINUE");
  // Once completed there is no action left to complete.
  Status again = Client()->CompleteLifecycleAction("train-asg", "drain", "i-0bbb");
  EXPECT_TRUE(again.Is(StatusCode::kNotFound)) << again.ToString();
}

TEST_F(AutoScalingSim, CompletingForAnUnknownHookFails) {
  Status st = Client()->CompleteLifecycleAction("train-asg", "no-hook", "i-0bbb");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.reason(), "ValidationError");
  EXPECT_EQ(Group("train-asg")["instances"]["i-0bbb"], "Terminating:Wait");
}

TEST_F(AutoScalingSim, AWrongSecretIsRefusedAsSignatureDoesNotMatch) {
  Status st = Client("not-the-secret")->UpdateAutoScalingGroup("train-asg", {.min_size = 0});
  EXPECT_TRUE(st.Is(StatusCode::kPermissionDenied)) << st.ToString();
  EXPECT_EQ(st.reason(), "SignatureDoesNotMatch");
  EXPECT_EQ(Group("train-asg")["min"], 1);
}

TEST_F(AutoScalingSim, ACredentialScopedToAnotherRegionIsRefused) {
  auto creds = StaticCredentials(AwsCredentials{kAccessKey, kSecret, ""});
  AutoScalingClientOptions o;
  o.region = "us-east-1";
  o.endpoint = sim_.endpoint();
  AutoScalingClient client(transport_, creds, SystemClock(), o);
  Status st = client.UpdateAutoScalingGroup("train-asg", {.min_size = 0});
  EXPECT_EQ(st.reason(), "SignatureDoesNotMatch") << st.ToString();
  EXPECT_NE(st.message().find("region"), std::string::npos) << st.message();
}

TEST_F(AutoScalingSim, ThrottlingAndServerErrorsAreRetried) {
  sim_.Control("POST", "/_sim/fault",
               R"({"action": "UpdateAutoScalingGroup", "status": 400, "code": "Throttling",
                   "count": 1})");
  sim_.Control("POST", "/_sim/fault",
               R"({"action": "UpdateAutoScalingGroup", "status": 503,
                   "code": "ServiceUnavailable", "count": 1})");
  Status st = Client()->UpdateAutoScalingGroup("train-asg", {.min_size = 0, .desired_capacity = 0});
  ASSERT_TRUE(st.ok()) << st.ToString();
  json calls = Calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0]["code"], "Throttling");
  EXPECT_EQ(calls[1]["code"], "ServiceUnavailable");
  EXPECT_EQ(calls[2]["status"], 200);
  EXPECT_EQ(Group("train-asg")["desired"], 0);
}

}  // namespace
}  // namespace sg
