#include "common/duration.h"

#include <gtest/gtest.h>

namespace sg {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

TEST(ParseDuration, ReadsEachUnit) {
  EXPECT_EQ(*ParseDuration("250ms"), milliseconds(250));
  EXPECT_EQ(*ParseDuration("90s"), seconds(90));
  EXPECT_EQ(*ParseDuration("5m"), minutes(5));
  EXPECT_EQ(*ParseDuration("1h"), hours(1));
  EXPECT_EQ(*ParseDuration("2d"), hours(48));
  EXPECT_EQ(*ParseDuration("0"), milliseconds(0));
}

TEST(ParseDuration, ReadsCompoundsAndFractions) {
  EXPECT_EQ(*ParseDuration("1h30m"), minutes(90));
  EXPECT_EQ(*ParseDuration("1m30s500ms"), milliseconds(90'500));
  EXPECT_EQ(*ParseDuration("1.5h"), minutes(90));
  EXPECT_EQ(*ParseDuration("0.25s"), milliseconds(250));
}

TEST(ParseDuration, RejectsMalformedInputNamingTheProblem) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {{"", "empty"},
               {"5", "missing unit"},
               {"5 minutes", "missing unit"},
               {"5y", "unknown unit"},
               {"-5s", "negative"},
               {"1..5s", "malformed"},
               {"s", "expected a number"},
               {"99999999999d", "too long"}};
  for (const Case& c : cases) {
    auto r = ParseDuration(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos)
        << c.text << " -> " << r.status().message();
  }
}

TEST(FormatDuration, GivesTheShortestFormThatReadsBack) {
  EXPECT_EQ(FormatDuration(seconds(90)), "1m30s");
  EXPECT_EQ(FormatDuration(hours(1)), "1h");
  EXPECT_EQ(FormatDuration(milliseconds(250)), "250ms");
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0s");
  for (const char* text : {"1h30m", "150s", "2d", "1500ms", "5m"}) {
    EXPECT_EQ(*ParseDuration(FormatDuration(*ParseDuration(text))), *ParseDuration(text)) << text;
  }
}

}  // namespace
}  // namespace sg
