// The notice file's one format (agent/run/notice_file.h): a notice's file and a
// request's have the same keys, in the same order, on one node and in a group.
#include "agent/run/notice_file.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/support/fake_clock.h"

namespace sg::testing {
namespace {

std::vector<std::string> Keys(const nlohmann::ordered_json& j) {
  std::vector<std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it) out.push_back(it.key());
  return out;
}

InterruptionEvent Notice(FakeClock& clock) {
  InterruptionEvent e;
  e.kind = InterruptionEvent::Kind::kNotice;
  e.action = "terminate";
  e.time = clock.Now() + std::chrono::seconds(120);
  e.observed = clock.Now();
  e.source = "meta-data/spot/instance-action";
  e.raw = R"({"action":"terminate","time":"2026-11-29T10:02:00Z"})";
  return e;
}

TEST(NoticeFile, ANoticesFileIsItsEventAndARequestsHasTheSameKeys) {
  FakeClock clock;
  const InterruptionEvent e = Notice(clock);
  const nlohmann::ordered_json notice = NoticeFileJson(e);
  EXPECT_EQ(notice, e.ToJson());
  const nlohmann::ordered_json request = RequestFileJson(clock.Now(), "SIGTERM");
  EXPECT_EQ(request["kind"], "request");
  EXPECT_EQ(request["action"], "checkpoint");
  EXPECT_EQ(request["notice"], false);
  EXPECT_TRUE(request["time"].is_null());
  EXPECT_EQ(request["source"], "SIGTERM");
  // The keys every file starts with, in one order.
  const std::vector<std::string> common = {"kind", "action", "time", "notice"};
  const std::vector<std::string> notice_keys = Keys(notice), request_keys = Keys(request);
  ASSERT_GE(notice_keys.size(), 4u);
  ASSERT_GE(request_keys.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(notice_keys.begin(), notice_keys.begin() + 4), common);
  EXPECT_EQ(std::vector<std::string>(request_keys.begin(), request_keys.begin() + 4), common);
  for (const char* key : {"observed", "source"}) {
    EXPECT_TRUE(notice.contains(key)) << key;
    EXPECT_TRUE(request.contains(key)) << key;
  }
}

TEST(NoticeFile, InAGroupBothNameTheRound) {
  FakeClock clock;
  EXPECT_EQ(NoticeFileJson(Notice(clock), 7)["round"], 7);
  EXPECT_EQ(RequestFileJson(clock.Now(), "the group's request", 7)["round"], 7);
  EXPECT_FALSE(NoticeFileJson(Notice(clock)).contains("round"));
  EXPECT_FALSE(RequestFileJson(clock.Now(), "SIGTERM").contains("round"));
}

}  // namespace
}  // namespace sg::testing
