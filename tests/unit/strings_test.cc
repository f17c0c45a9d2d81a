#include "common/strings.h"

#include <gtest/gtest.h>

namespace sg {
namespace {

TEST(Strings, SplitKeepsEmptyFields) {
  EXPECT_EQ(Split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(Split("", ','), (std::vector<std::string>{""}));
}

TEST(Strings, TrimRemovesSurroundingWhitespaceOnly) {
  EXPECT_EQ(Trim("  a b \n"), "a b");
  EXPECT_EQ(Trim("   "), "");
}

TEST(Strings, EditDistanceCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(EditDistance("keep", "kep"), 1u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
}

TEST(Strings, ClosestMatchSuggestsOnlyPlausibleTypos) {
  const std::vector<std::string> keys = {"keep", "job", "store", "upload_interval"};
  EXPECT_EQ(ClosestMatch("kep", keys), "keep");
  EXPECT_EQ(ClosestMatch("upload_intervall", keys), "upload_interval");
  EXPECT_EQ(ClosestMatch("STORE", keys), "store");
  EXPECT_EQ(ClosestMatch("completely_different", keys), "");
}

}  // namespace
}  // namespace sg
