#include "common/log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace sg {
namespace {

TEST(Log, JsonLinesEscapeWhatWouldBreakThem) {
  const std::string line =
      FormatJsonLogLine("2026-11-22T08:22:00.000Z", "info", "path \"a\\b\"\nnext line\ttab");
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one event, one line";
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["time"], "2026-11-22T08:22:00.000Z");
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["msg"], "path \"a\\b\"\nnext line\ttab");
}

TEST(Log, InvalidUtf8IsReplacedNotFatal) {
  const std::string line = FormatJsonLogLine("t", "warn", std::string("bad \xff byte"));
  nlohmann::json parsed;
  EXPECT_NO_THROW(parsed = nlohmann::json::parse(line));
  EXPECT_TRUE(parsed["msg"].get<std::string>().starts_with("bad "));
}

TEST(Log, LevelsAndFormatsParseCaseInsensitively) {
  EXPECT_EQ(*ParseLogLevel("DEBUG"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogFormat("Json"), LogFormat::kJson);
  EXPECT_FALSE(ParseLogLevel("loud").ok());
  EXPECT_NE(ParseLogFormat("xml").status().message().find("text, json"), std::string::npos);
}

}  // namespace
}  // namespace sg
