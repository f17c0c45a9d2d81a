#include "common/spare_buffer.h"

#include <gtest/gtest.h>

namespace sg {
namespace {

// Each test runs on the main thread, whose spare the tests before it may
// have left: every test first takes whatever spare there is.
void DropSpare() { (void)TakeSpareBuffer(64u << 20); }

TEST(SpareBuffer, ABodyGivenBackIsTheMemoryOfTheNextOneThatFits) {
  DropSpare();
  std::string body(4u << 20, 'x');
  const char* memory = body.data();
  RecycleResponseBody(std::move(body));
  std::string next = TakeSpareBuffer(3u << 20);
  EXPECT_EQ(next.data(), memory);
  EXPECT_TRUE(next.empty()) << "the spare comes back empty, whatever it held";
  EXPECT_GE(next.capacity(), 4u << 20);
}

TEST(SpareBuffer, SmallOrLargerBodiesGetTheirOwnMemory) {
  DropSpare();
  std::string body(2u << 20, 'x');
  const char* memory = body.data();
  RecycleResponseBody(std::move(body));
  // Below 1 MiB the spare stays for a large body.
  std::string small = TakeSpareBuffer(1000);
  EXPECT_NE(small.data(), memory);
  EXPECT_GE(small.capacity(), 1000u);
  // Larger than the spare: new memory, reserved at its size.
  std::string larger = TakeSpareBuffer(3u << 20);
  EXPECT_NE(larger.data(), memory);
  EXPECT_GE(larger.capacity(), 3u << 20);
  // The spare is still there for one that fits.
  EXPECT_EQ(TakeSpareBuffer(2u << 20).data(), memory);
}

TEST(SpareBuffer, BodiesUnder1MiBOrOver64MiBAreNotKept) {
  DropSpare();
  std::string tiny(1000, 'x');
  tiny.shrink_to_fit();
  const char* tiny_memory = tiny.data();
  RecycleResponseBody(std::move(tiny));
  EXPECT_NE(TakeSpareBuffer(1u << 20).data(), tiny_memory);
  std::string huge;
  huge.reserve(65u << 20);
  const char* huge_memory = huge.data();
  RecycleResponseBody(std::move(huge));
  EXPECT_NE(TakeSpareBuffer(2u << 20).data(), huge_memory);
}

}  // namespace
}  // namespace sg
